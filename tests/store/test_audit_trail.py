"""The audit chain in the store, on SQLite and PostgreSQL (store/audit.py, store/audit_verify.py):
rows written by real audited changes verify; each kind of tampering done directly in the database
is named at its row; concurrent writers still form one chain; an upgrade chains the rows written
before the chain existed; a trail whose head row is gone refuses new audited changes."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

import tidekeep as tk
from tidekeep.errors import AuditTrailBroken
from tidekeep.store.audit_chain import GENESIS, link_hash
from tidekeep.store.database import alembic_config
from tidekeep.store.schema import audit, audit_chain

T0 = 1_700_000_000_000


@pytest.fixture
def trail(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    """A workspace whose trail holds six rows: holds added and removed on two streams."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), create=True)
    for name in ("a/one", "a/two"):
        c.create_stream(name)
        c.holds.add("stream", name, f"case {name}")
    for hold in c.holds.list():
        c.holds.remove(hold.id)
    c.holds.add("stream", "a/one", "case again")
    yield c
    c.close()


def rows(client: tk.Client) -> list[dict[str, Any]]:
    with client.workspace.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(audit).order_by(audit.c.id))]


def execute(client: tk.Client, *statements: Any) -> None:
    """Tampering: statements run straight on the database, around tidekeep."""
    with client.workspace.db.engine.begin() as conn:
        for statement in statements:
            conn.execute(statement)


def broken(client: tk.Client, anchor: str | None = None) -> tuple[str, int]:
    verdict = client.audit_verify(anchor)
    assert not verdict.ok and verdict.broken is not None
    return verdict.broken.kind, verdict.broken.row_id


def test_real_audited_changes_form_a_chain_that_verifies(trail: tk.Client) -> None:
    written = rows(trail)
    assert [r["id"] for r in written] == [1, 2, 3, 4, 5]
    assert written[0]["prev_hash"] == GENESIS
    for before, row in itertools.pairwise(written):
        assert row["prev_hash"] == before["row_hash"] == link_hash(before["prev_hash"], before)
    verdict = trail.audit_verify()
    assert verdict.ok and (verdict.rows, verdict.last_id, verdict.last_hash) == (5, 5, written[-1]["row_hash"])
    assert trail.audit_head() == {"id": 5, "hash": written[-1]["row_hash"], "time_ms": T0}


def test_an_edited_row_is_named(trail: tk.Client) -> None:
    execute(trail, sa.update(audit).where(audit.c.id == 3).values(reason="nothing to see"))
    assert broken(trail) == ("changed", 3)


def test_an_edited_byte_count_is_named(trail: tk.Client) -> None:
    execute(trail, sa.update(audit).where(audit.c.id == 2).values(bytes_freed=1))
    assert broken(trail) == ("changed", 2)


def test_a_deleted_row_is_named_by_the_row_after_it(trail: tk.Client) -> None:
    execute(trail, sa.delete(audit).where(audit.c.id == 2))
    assert broken(trail) == ("deleted", 3)


def test_deleted_last_rows_are_seen_against_the_head(trail: tk.Client) -> None:
    execute(trail, sa.delete(audit).where(audit.c.id >= 4))
    assert broken(trail) == ("deleted", 3)


def test_rows_swapped_are_named_at_the_first(trail: tk.Client) -> None:
    first, second = rows(trail)[1], rows(trail)[3]
    columns = ("time_ms", "action", "target", "reason", "details", "prev_hash", "row_hash")
    execute(trail, sa.update(audit).where(audit.c.id == 2).values({c: second[c] for c in columns}),
            sa.update(audit).where(audit.c.id == 4).values({c: first[c] for c in columns}))
    assert broken(trail) == ("changed", 2)


def test_a_row_inserted_in_between_with_a_forged_hash_is_named(trail: tk.Client) -> None:
    # room for it: the rows after row 2 move up by ten, as a careful forger would leave the chain
    execute(trail, sa.update(audit).where(audit.c.id > 2).values(id=audit.c.id + 10))
    before = rows(trail)[1]
    forged = {"id": 3, "time_ms": T0, "action": "hold_remove", "target": "a/one", "old_head": None, "new_head": None,
              "bytes_freed": 0, "reason": "forged", "actor": "someone", "details": None}
    execute(trail, sa.insert(audit).values(**forged, prev_hash=before["row_hash"],
                                           row_hash=link_hash(before["row_hash"], forged)))
    assert broken(trail) == ("inserted", 3)


def test_a_row_appended_around_tidekeep_is_named(trail: tk.Client) -> None:
    last = rows(trail)[-1]
    forged = {"id": 6, "time_ms": T0, "action": "hold_remove", "target": "a/one", "old_head": None, "new_head": None,
              "bytes_freed": 0, "reason": "forged", "actor": "someone", "details": None}
    execute(trail, sa.insert(audit).values(**forged, prev_hash=last["row_hash"],
                                           row_hash=link_hash(last["row_hash"], forged)))
    assert broken(trail) == ("inserted", 6)
    execute(trail, sa.insert(audit).values(**{**forged, "id": 7}))  # and one without any hash
    assert broken(trail) == ("inserted", 6)


def test_an_anchor_proves_the_trail_up_to_it_until_a_row_before_it_changes(trail: tk.Client) -> None:
    anchor = trail.audit_head()["hash"]
    trail.holds.add("stream", "a/two", "later")
    assert trail.audit_verify(anchor).ok and trail.audit_verify(anchor).anchor_id == 5
    execute(trail, sa.update(audit).where(audit.c.id == 6).values(reason="after the anchor"))
    verdict = trail.audit_verify(anchor)
    assert not verdict.ok and verdict.anchor_id == 5  # the anchored part still holds; the row after it does not
    execute(trail, sa.update(audit).where(audit.c.id == 1).values(actor="someone else"))
    verdict = trail.audit_verify(anchor)
    assert verdict.anchor_id is None and broken(trail, anchor) == ("changed", 1)


def test_without_its_head_the_trail_is_broken_and_refuses_new_audited_changes(trail: tk.Client) -> None:
    execute(trail, sa.delete(audit_chain))
    assert broken(trail) == ("head", 5)
    with pytest.raises(AuditTrailBroken, match="head is missing"):
        trail.holds.add("stream", "a/two", "refused")
    assert [h.reason for h in trail.holds.list()] == ["case again"]  # the hold rolled back with its row


def test_a_row_written_around_tidekeep_refuses_new_audited_changes(trail: tk.Client) -> None:
    forged = {"time_ms": T0, "action": "hold_remove", "target": "a/one", "old_head": None, "new_head": None,
              "bytes_freed": 0, "reason": "forged", "actor": "someone", "details": None}
    execute(trail, sa.insert(audit).values(id=6, **forged))  # the next id, no hash
    with pytest.raises(AuditTrailBroken, match=r"rows after the chain's head \(row 5\) were written around"):
        trail.holds.add("stream", "a/two", "refused")
    assert [h.reason for h in trail.holds.list()] == ["case again"]
    assert broken(trail) == ("unchained", 6)


def test_concurrent_writers_form_one_chain(tmp_path: Path, metadata_url: str) -> None:
    writers, each = 4, 15
    clients = [tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                          create=True) for _ in range(writers)]
    try:
        clients[0].create_stream("c/s")
        start = threading.Barrier(writers)
        failures: list[BaseException] = []

        def write(client: tk.Client, number: int) -> None:
            try:
                start.wait()
                for i in range(each):
                    client.holds.add("stream", "c/s", f"writer {number} hold {i}")
            except BaseException as exc:  # reported below: a thread's exception is otherwise lost
                failures.append(exc)

        threads = [threading.Thread(target=write, args=(c, n)) for n, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        written = rows(clients[0])
        assert [r["id"] for r in written] == list(range(1, writers * each + 1))
        # each writer's rows are in its own order, and the writers did interleave or not: either is one chain
        for number in range(writers):
            mine = [r["reason"] for r in written if r["reason"].startswith(f"writer {number} ")]
            assert mine == [f"writer {number} hold {i}" for i in range(each)]
        verdict = clients[0].audit_verify()
        assert verdict.ok and verdict.rows == writers * each
    finally:
        for c in clients:
            c.close()


def test_an_upgrade_chains_the_rows_written_before_the_chain(trail: tk.Client) -> None:
    engine = trail.workspace.db.engine
    with engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0017")
        conn.commit()
        assert "audit_chain" not in sa.inspect(conn).get_table_names()
        # rows as the older tidekeep wrote them, with a gap its sequence left
        conn.execute(sa.text("INSERT INTO audit (id, time_ms, action, target, bytes_freed, reason, actor) "
                             "VALUES (9, 1, 'truncate', 'a/one', 10, 'old', 'me')"))
        conn.commit()
    trail.workspace.db.upgrade()
    assert [r["id"] for r in rows(trail)] == [1, 2, 3, 4, 5, 9]
    verdict = trail.audit_verify()
    assert verdict.ok and verdict.last_id == 9
    trail.holds.add("stream", "a/two", "after the upgrade")
    assert [r["id"] for r in rows(trail)][-1] == 10 and trail.audit_verify().ok
