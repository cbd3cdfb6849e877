"""Credentials never travel in a storage URI: whether a URI carries some, and which part.

Object-store credentials come from the store's own standard chain — for S3 the AWS environment
variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared config and
credentials files, instance or pod roles (docs/storage.md, "Object storage"). A URI is copied into
tidekeep.yaml, passed to Spark executors and printed in messages, so one carrying a key would spread
the key; `storage.uri` with credentials is refused, and the refusal names the part, never its value.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

# schemes whose user part is an access key (pyarrow reads s3://KEY:SECRET@bucket as credentials)
KEYED_SCHEMES = frozenset({"s3", "gs", "gcs"})
# words a query parameter naming a credential contains (pyarrow's S3 options: access_key,
# secret_key, session_token; and their kin in other filesystems)
SECRET_WORDS = ("access_key", "accesskey", "secret", "token", "password", "passwd", "credential")


def credentials_in_uri(uri: str) -> str | None:
    """Which part of `uri` carries credentials ("a password in its user part", "the query
    parameter 'secret_key'"), or None when it carries none. A plain path carries none."""
    if "://" not in uri:
        return None
    scheme, rest = uri.split("://", 1)
    if scheme.lower() in KEYED_SCHEMES:
        # a bucket name holds neither ":" nor "@", and an S3 secret may hold "/" or "+": everything
        # before the first "/", "?" or "#" is the bucket unless it is a user part
        head = re.split(r"[/?#]", rest, maxsplit=1)[0]
        if ":" in head:
            return "a password in its user part"
        if "@" in head:
            return "an access key in its user part"
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:  # an unparsable authority (a bad port, a bad IPv6 address): pyarrow refuses it
        return None
    if password is not None:
        return "a password in its user part"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if any(word in name.lower() for word in SECRET_WORDS):
            return f"the query parameter {name!r}"
    return None


def is_credential_setting(key: str) -> bool:
    """Whether a setting's name (`storage.secret_key`) asks for a credential."""
    leaf = key.rsplit(".", 1)[-1].lower()
    return leaf.startswith("aws_") or any(word in leaf for word in SECRET_WORDS)


CREDENTIALS_CHAIN = ("object-store credentials come from the store's standard chain (for S3: AWS_ACCESS_KEY_ID "
                     "and AWS_SECRET_ACCESS_KEY in the environment, ~/.aws/credentials, an instance or pod "
                     "role), never from storage.uri or tidekeep.yaml")

__all__ = ["CREDENTIALS_CHAIN", "credentials_in_uri", "is_credential_setting"]
