"""What the service's task tests share: a RetentionService of owner "A" on real leases of a fresh
workspace, on SQLite and PostgreSQL, with a ManualClock at T0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.service_env import T0, TTL
from tidekeep.service.scheduler import RetentionService
from tidekeep.store.leases import LeaseStore


@pytest.fixture
def env(tmp_path: Path, metadata_url: str) -> Iterator[tuple[RetentionService, LeaseStore, tk.ManualClock]]:
    clock = tk.ManualClock(T0)
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   create=True)
    leases = LeaseStore(c.workspace.db, clock)
    yield RetentionService(leases, clock, "A", ttl_ms=TTL), leases, clock
    c.close()
