from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.helpers.api_server import LiveApi, live_api

import tidekeep as tk


@pytest.fixture
def api(client: tk.Client) -> Iterator[LiveApi]:
    """A live API (authentication on) over the `client` fixture's workspace, SQLite and PostgreSQL."""
    with live_api(client.workspace) as served:
        yield served


@pytest.fixture
def sqlite_api(sqlite_client: tk.Client) -> Iterator[LiveApi]:
    """A live API over a SQLite workspace, for tests whose subject is not the metadata backend."""
    with live_api(sqlite_client.workspace) as served:
        yield served
