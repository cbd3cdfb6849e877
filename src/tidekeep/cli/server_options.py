"""Where the API server of the CLI's --server mode is and how to prove who we are (a leaf module:
the root options build it without loading the HTTP client, cli/remote.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerOptions:
    """The root's --server, --token-file and --server-ca, or TIDEKEEP_SERVER, TIDEKEEP_TOKEN and
    TIDEKEEP_CA_BUNDLE (docs/api.md, "The CLI against a server")."""

    url: str
    token_file: Path | None = None
    ca_bundle: str | None = None
