"""Secrets never shown: the password of a URL, and secret-bearing query parameters, masked.

Settings that are URLs can carry credentials — `metadata.url` a database password
(`postgresql+psycopg://user:password@host/db`), `storage.uri` and `catalog.data_roots` object-store
keys (`s3://key:secret@bucket/path`, `?secret_key=…`). tidekeep prints, logs and raises errors about
these settings, so every such text goes through `redact` first (docs/configuration.md "Secrets"):
typed errors (tidekeep.errors), log records (`RedactingFilter`), `config show` and the URLs `init`
and `db upgrade` print. The user name, host and path stay: they say which store is meant.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "***"

# scheme://user:password@ — the password runs to the last "@" of the token (a password may hold
# one; a host may not), never across whitespace or a quote
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s'\"]*):(?P<secret>[^\s'\"]*)@")
# ?password=…, &secret_key=…, password=… in a libpq connection string, and their kin
_SECRET_PARAMETER = re.compile(
    r"(?i)(?P<head>(?:^|(?<=[?&;\s(,]))[\w.\-]*(?:password|passwd|pwd|secret|token|access_key|"
    r"accesskey|credential|apikey|api_key)[\w.\-]*=)(?P<secret>[^&\s'\")]+)")

# The same shapes for Spark (Java syntax): `spark.redaction.regex` masks a configuration value
# holding a URL with a password, `spark.sql.redaction.string.regex` the passwords in plan texts (a
# data source option holding a URL), in the UI and the event logs.
SPARK_CONF_REDACTION = r"(?i)secret|password|token|access[.]?key|://[^:/?#@\s]*:[^\s]*@"  # Spark's default, and URLs
SPARK_STRING_REDACTION = (r"(?<=://)[^:/?#@\s'\"]*:[^\s'\"]*(?=@)"
                          r"|(?i)(?<=password=|secret_key=|session_token=|access_key=)[^&\s'\")]+")


def redact(text: str) -> str:
    """`text` with every URL password and secret-bearing parameter replaced by ***."""
    if "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@" if m["secret"] else m[0], text)
    if "=" in text:
        text = _SECRET_PARAMETER.sub(lambda m: m["head"] + MASK, text)
    return text


def redact_value(value: Any) -> Any:
    """A setting's value fit to show: strings redacted, sequences item by item."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    return value


class RedactingFilter(logging.Filter):
    """A handler filter that redacts each record before any formatter sees it: its message, its
    traceback and the string `fields` the service's JSON logs add."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.fields = {key: redact_value(value) for key, value in fields.items()}
        return True


__all__ = ["MASK", "SPARK_CONF_REDACTION", "SPARK_STRING_REDACTION", "RedactingFilter", "redact", "redact_value"]
