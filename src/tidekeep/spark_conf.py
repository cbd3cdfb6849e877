"""The `spark.conf` setting: Spark configuration passed through to the sessions tidekeep starts.

A mapping of Spark conf keys to scalar values (`spark.driver.memory: 4g`). Three kinds of key are
refused, each naming the key (docs/configuration.md, "Spark settings"):
- keys that are not Spark's (they must start with `spark.`);
- the confs tidekeep sets itself, because its correctness or another setting stands for them (the
  master, the UI switch, UTC time, the redaction of secrets);
- confs that would carry a secret: Spark shows its configuration in the UI and writes it into the
  event log, so a key Spark itself would redact (a password, a secret, a token, an access key) or a
  value holding a URL with credentials is refused; executors get credentials by reference instead
  (docs/security.md), and Kubernetes confs that name a Secret (a reference) pass.
A pure decision: no Spark, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from .errors import InvalidInput
from .redaction import SPARK_CONF_REDACTION
from .uri_credentials import SECRET_WORDS, credentials_in_uri

# tidekeep's own confs, each with what to do instead
_UTC = "tidekeep keeps every Spark time in UTC"
_REDACTION = "tidekeep sets it so no password shows in the UI or the event log"
OWNED_CONFS: Mapping[str, str] = {
    "spark.master": "set spark.master instead",
    "spark.remote": "set spark.remote instead",
    "spark.api.mode": "set spark.remote for Spark Connect instead",
    "spark.app.name": "set spark.app_name instead",
    "spark.ui.enabled": "set spark.ui instead",
    "spark.ui.showConsoleProgress": "tidekeep shows its own progress",
    "spark.sql.session.timeZone": _UTC,
    "spark.driver.extraJavaOptions": _UTC + " and sets its logging there",
    "spark.executor.extraJavaOptions": _UTC,
    "spark.redaction.regex": _REDACTION,
    "spark.sql.redaction.string.regex": _REDACTION,
}

# Kubernetes confs whose key names a Secret (`spark.kubernetes.executor.secretKeyRef.ENV=name:key`,
# `spark.kubernetes.driver.secrets.name=/mount/path`): their values are references to a Secret the
# cluster holds, never the secret, which is how a deployment hands credentials to pods
# (docs/deployment.md); their values are still checked for a URL with credentials.
SECRET_REFERENCE_PREFIXES = tuple(f"spark.kubernetes.{role}.{kind}." for role in ("driver", "executor")
                                  for kind in ("secretKeyRef", "secrets"))
# Spark's own test of a secret-bearing conf key (spark.redaction.regex) and tidekeep's secret words
_SECRET_KEY = re.compile(SPARK_CONF_REDACTION.removeprefix("(?i)"), re.IGNORECASE)
_EXAMPLE = "{spark.driver.memory: 4g}"


def _scalar_text(key: str, value: Any) -> str:
    """The conf value as Spark takes it: a string; booleans as Spark writes them (true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise InvalidInput(f"the value of {key!r} must be a non-empty string, number or boolean")


def conf_problem(key: Any) -> str | None:
    """Why `key` may not be passed through (one clause naming it), or None when it may."""
    if not isinstance(key, str) or not key.startswith("spark.") or key == "spark." or re.search(r"\s", key):
        return f"{key!r} is not a Spark conf key (they start with 'spark.')"
    if key in OWNED_CONFS:
        return f"{key!r} is tidekeep's own: {OWNED_CONFS[key]}"
    lowered = key.lower()
    if key.startswith(SECRET_REFERENCE_PREFIXES) and len(key) > len(next(
            prefix for prefix in SECRET_REFERENCE_PREFIXES if key.startswith(prefix))):
        return None
    if _SECRET_KEY.search(key) or any(word in lowered for word in SECRET_WORDS):
        return (f"{key!r} would carry a secret into Spark's UI and event log: executors get credentials by "
                f"reference (docs/security.md)")
    return None


def parse_spark_conf(value: Any) -> dict[str, str]:
    """The `spark.conf` setting: a mapping from YAML, or a YAML flow mapping in a string from the
    environment or a flag (`{spark.driver.memory: 4g, spark.executor.cores: 2}`); keys sorted.
    InvalidInput naming the first refused key; a value is never shown (it may be a secret)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise InvalidInput(f"expected a mapping of Spark confs such as {_EXAMPLE}, got text that is not "
                               f"YAML") from None
        if value is None:
            return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"expected a mapping of Spark confs such as {_EXAMPLE}")
    conf: dict[str, str] = {}
    for key, item in value.items():
        problem = conf_problem(key)
        if problem is not None:
            raise InvalidInput(problem)
        text = _scalar_text(key, item)
        carried = credentials_in_uri(text) or (
            "a password in a URL" if re.search(r"://[^:/?#@\s]*:[^\s]*@", text) else None)
        if carried is not None:
            raise InvalidInput(f"the value of {key!r} carries credentials ({carried}): executors get "
                               f"credentials by reference (docs/security.md)")
        conf[key] = text
    return dict(sorted(conf.items()))


__all__ = ["OWNED_CONFS", "SECRET_REFERENCE_PREFIXES", "conf_problem", "parse_spark_conf"]
