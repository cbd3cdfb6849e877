"""Leases in the metadata store, on SQLite and PostgreSQL: exclusive, renewal, expiry and takeover
by the client clock, release, fencing versions, concurrent acquire (exactly one wins), bad input;
and the pure rule against a brute-force history oracle."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.errors import InvalidInput
from tidekeep.store.leases import Lease, LeaseAction, LeaseStore, decide_lease, new_owner_id

TTL = 10_000


@pytest.fixture
def clocked(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tuple[LeaseStore, tk.ManualClock]]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
        create=True)
    yield LeaseStore(c.workspace.db, c.clock), clock
    c.close()


def test_a_lease_is_exclusive_until_it_expires_then_taken_over(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, clock = clocked
    first = leases.acquire("retention:s/a", "A", TTL)
    assert first.action is LeaseAction.ACQUIRE and first.lease.version == 1
    assert first.lease.expires_ms == clock.now_ms() + TTL
    denied = leases.acquire("retention:s/a", "B", TTL)
    assert denied.action is LeaseAction.DENY and denied.lease.owner == "A"
    clock.advance(TTL - 1)
    assert leases.acquire("retention:s/a", "B", TTL).action is LeaseAction.DENY  # 1 ms left
    clock.advance(1)
    taken = leases.acquire("retention:s/a", "B", TTL)
    assert taken.action is LeaseAction.ACQUIRE and taken.lease.owner == "B" and taken.lease.version == 2
    assert leases.get("retention:s/a") == taken.lease
    assert leases.acquire("retention:s/a", "A", TTL).action is LeaseAction.DENY  # A lost it


def test_renewal_keeps_the_version_and_extends_the_expiry(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, clock = clocked
    leases.acquire("sweep", "A", TTL)
    for _ in range(3):
        clock.advance(TTL - 100)  # renewed before it runs out: nobody else can take it
        assert leases.acquire("sweep", "B", TTL).action is LeaseAction.DENY
        renewed = leases.acquire("sweep", "A", TTL)
        assert renewed.action is LeaseAction.RENEW and renewed.lease.version == 1
        assert renewed.lease.expires_ms == clock.now_ms() + TTL
    assert leases.get("sweep").expires_ms == clock.now_ms() + TTL


def test_release_frees_at_once_and_versions_keep_growing(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, _clock = clocked
    leases.acquire("r", "A", TTL)
    assert leases.release("r", "B") is False  # not B's to release
    assert leases.get("r").owner == "A"
    assert leases.release("r", "A") is True
    assert leases.get("r").owner is None
    assert leases.release("r", "A") is False
    again = leases.acquire("r", "B", TTL)
    assert again.action is LeaseAction.ACQUIRE and again.lease.version == 2


def test_release_all_and_list(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, clock = clocked
    for name in ("retention:s/a", "retention:s/b", "sweep"):
        leases.acquire(name, "A", TTL)
    leases.acquire("retention:s/c", "B", TTL)
    assert [lease.resource for lease in leases.list("retention:")] == ["retention:s/a", "retention:s/b",
                                                                       "retention:s/c"]
    assert leases.release_all("A") == ["retention:s/a", "retention:s/b", "sweep"]
    held = {lease.resource: lease.owner for lease in leases.list() if lease.held_at(clock.now_ms())}
    assert held == {"retention:s/c": "B"}


def test_purge_deletes_only_long_expired_or_released_rows_under_the_prefix(
        clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, clock = clocked
    leases.acquire("member:dead", "dead", TTL)
    leases.acquire("member:gone", "gone", TTL)
    leases.release("member:gone", "gone")
    leases.acquire("retention:s/a", "dead", TTL)
    clock.advance(TTL)
    leases.acquire("member:live", "live", TTL)
    assert leases.purge("member:", clock.now_ms() - TTL) == 1  # only the released one is over a TTL old
    assert [lease.resource for lease in leases.list()] == ["member:dead", "member:live", "retention:s/a"]
    clock.advance(TTL)
    assert leases.purge("member:", clock.now_ms() - TTL) == 0  # member:dead expired exactly a TTL ago
    clock.advance(1)
    assert leases.purge("member:", clock.now_ms() - TTL) == 1
    assert [lease.resource for lease in leases.list()] == ["member:live", "retention:s/a"]


def test_work_done_is_fenced_by_owner_and_version(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, clock = clocked
    lease = leases.acquire("r", "A", TTL).lease
    assert leases.record_work_done("r", "A", lease.version, 123) is True
    clock.advance(TTL)
    leases.acquire("r", "B", TTL)  # takeover
    assert leases.record_work_done("r", "A", lease.version, 456) is False  # the old holder records nothing
    assert leases.get("r").work_done_ms == 123


def _take(c: tk.Client, owner: str, resource: str, barrier: threading.Barrier,
          results: list[tuple[str, LeaseAction]], errors: list[BaseException]) -> None:
    try:
        barrier.wait()
        results.append((owner, LeaseStore(c.workspace.db, c.clock).acquire(resource, owner, 60_000).action))
    except BaseException as exc:  # collected and asserted by the test
        errors.append(exc)


def test_concurrent_acquire_exactly_one_wins(tmp_path: Path, metadata_url: str) -> None:
    clients = [tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
               for _ in range(6)]
    try:
        clients[0].workspace.db.ensure_schema()
        for round_number in range(5):
            resource = f"retention:s/r{round_number}"
            barrier = threading.Barrier(len(clients))
            results: list[tuple[str, LeaseAction]] = []
            errors: list[BaseException] = []

            threads = [threading.Thread(target=_take, args=(c, f"owner{i}", resource, barrier, results, errors))
                       for i, c in enumerate(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            winners = [owner for owner, action in results if action is LeaseAction.ACQUIRE]
            assert len(winners) == 1 and len(results) == len(clients)
            assert LeaseStore(clients[0].workspace.db, clients[0].clock).get(resource).owner == winners[0]
    finally:
        for c in clients:
            c.close()


def test_bad_input_is_rejected_and_changes_nothing(clocked: tuple[LeaseStore, tk.ManualClock]) -> None:
    leases, _clock = clocked
    leases.acquire("r", "A", TTL)
    before = leases.list()
    with pytest.raises(InvalidInput, match="invalid lease ttl 0"):
        leases.acquire("r", "A", 0)
    with pytest.raises(InvalidInput, match="invalid lease ttl -5"):
        leases.acquire("r", "B", -5)
    with pytest.raises(InvalidInput, match="invalid lease resource ''"):
        leases.acquire("", "A", TTL)
    with pytest.raises(InvalidInput, match="invalid lease owner ''"):
        leases.release("r", "")
    assert leases.list() == before


def test_owner_ids_are_host_pid_uuid_and_unique() -> None:
    import os

    first, second = new_owner_id(), new_owner_id()
    assert first != second
    assert first.split(":")[1] == str(os.getpid()) and len(first.split(":")) == 3


# ---- the pure rule against a brute-force oracle ------------------------------------------------

OWNERS = ["A", "B", "C"]
operations = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(OWNERS), st.integers(1, 50)),
    st.tuples(st.just("release"), st.sampled_from(OWNERS), st.just(0)),
    st.tuples(st.just("advance"), st.just(""), st.integers(0, 60)),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_decide_lease_matches_a_history_oracle(ops: list[tuple[str, str, int]]) -> None:
    """The oracle replays the history of grants and releases: the holder at `now` is the owner of
    the latest grant that was neither released nor run out (renewals extend it)."""
    now, row = 0, None
    history: list[tuple[str, str, int]] = []  # (event, owner, expiry)
    grants_to_new_holders = 0
    for op, owner, amount in ops:
        if op == "advance":
            now += amount
            continue
        if op == "release":
            if row is not None and row.owner == owner:
                row = Lease(row.resource, None, 0, row.version, row.acquired_ms)
                history.append(("release", owner, 0))
            continue
        holder = None
        for event, who, expiry in history:  # brute force: replay everything
            holder = (who, expiry) if event == "grant" else None
        holder_now = holder[0] if holder is not None and (holder[1] > now or holder[0] == owner) else None
        if holder is not None and holder[0] == owner:
            expected = LeaseAction.RENEW
        elif holder_now is None:
            expected = LeaseAction.ACQUIRE
        else:
            expected = LeaseAction.DENY
        decision = decide_lease(row, "r", owner, now, amount)
        assert decision.action is expected
        if decision.granted:
            assert decision.lease.owner == owner and decision.lease.expires_ms >= now + amount
            if expected is LeaseAction.ACQUIRE:
                grants_to_new_holders += 1
                assert decision.lease.version == grants_to_new_holders  # fencing token: +1 per new holder
            else:
                assert decision.lease.version == row.version
            history.append(("grant", owner, decision.lease.expires_ms))
        else:
            assert decision.lease == row
        row = decision.lease if decision.granted else row
