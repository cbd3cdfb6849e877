"""A stale-lease truncation under `tidekeep serve`, as real processes on SQLite and PostgreSQL.

Process A takes the stream's lease, decides a truncation and waits before applying it (the pause
point `retention.before_truncate`, gated by a file the test removes); meanwhile the lease is taken
over by B at explicit times (the next version). A's truncation must be refused by the lease check
in its own transaction: the head, the chunk rows, the files and the audit table stay as they were,
A logs "lease lost" and exits 0, and B, deciding afresh under its lease, truncates where the
policy says.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_serve import heads, open_client, prepare, serve_env, start_serve, truncations, wait_for, write_batch

import tidekeep as tk
from helpers.storage import chunk_rows, stored_files
from tidekeep.store.fencing import LeaseFence
from tidekeep.store.leases import LeaseAction, LeaseStore
from tidekeep.streams.of_workspace import retention_manager

DAY = 86_400_000
STREAM = "s/a"
RESOURCE = f"retention:{STREAM}"


def test_a_stale_lease_truncation_is_refused_and_changes_nothing(tmp_path: Path, metadata_url: str) -> None:
    client = open_client(tmp_path, metadata_url)
    expected = prepare(client, [STREAM])
    write_batch(client, STREAM, 2)  # the oldest record now retains more than the policy's min: a cut is due
    before = (heads(client, [STREAM]), [tuple(r) for r in chunk_rows(client, STREAM)], stored_files(client))
    assert before[0][STREAM] != expected[STREAM]
    recorded = len(client.stream(STREAM).retention.records())
    env = serve_env(tmp_path, metadata_url)
    gate = tmp_path / "takeover-pending"  # A waits between its decision and its truncation while this exists
    gate.touch()
    env["TIDEKEEP_PAUSE"] = f"retention.before_truncate=@{gate}"
    log = tmp_path / "serve-a.log"
    a = start_serve(["--once", "--lease-ttl", "30s", "--no-catalog", "--no-archives", "--no-watermarks",
                     "--no-compaction"], env, log)
    try:
        # A's cycle records the tail in its first transaction, under its lease; its decision follows at once
        wait_for(lambda: len(client.stream(STREAM).retention.records()) > recorded, 60, "A to start its cycle", [log])
        held = LeaseStore(client.workspace.db, client.clock).get(RESOURCE)
        assert held is not None and f":{a.pid}:" in str(held.owner)
        # B's clock is a day ahead: A's lease (renewed every 10 s by the wall clock) has run out for B
        later = tk.ManualClock(client.clock.now_ms() + DAY)
        taken = LeaseStore(client.workspace.db, later).acquire(RESOURCE, "B", 60_000)
        assert taken.action is LeaseAction.ACQUIRE and taken.lease.version == held.version + 1
        gate.unlink()  # the takeover is done: A goes on to apply its stale decision
        assert a.wait(timeout=120) == 0, log.read_text()
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    text = log.read_text()
    assert (f"lease lost: {RESOURCE} was held by {held.owner} at version {held.version} and is now held by B at "
            f"version {held.version + 1}; the work decided under version {held.version} is not applied") in text, text
    assert f"truncated {STREAM}" not in text
    after = (heads(client, [STREAM]), [tuple(r) for r in chunk_rows(client, STREAM)], stored_files(client))
    assert after == before
    assert truncations(client) == []
    # the new holder decides again and applies its own decision
    fence = LeaseFence(RESOURCE, "B", taken.lease.version)
    decided = retention_manager(client.workspace).run(STREAM, fence=fence)
    assert decided.cut == expected[STREAM] and heads(client, [STREAM]) == expected
    assert truncations(client) == [(STREAM, json.dumps({str(k): v for k, v in sorted(expected[STREAM].items())}))]
    client.close()
