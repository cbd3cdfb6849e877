"""`tidekeep audit verify [--anchor HASH]` and `tidekeep audit anchor [--output FILE]`, run for real in
subprocesses against one SQLite workspace: the head printed and written owner-only, a verification
that passes (exit 0) and one that names a tampered row (exit 19), and bad anchors refused in one line."""

from __future__ import annotations

import json
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from helpers.cli import run_cli as cli
from tidekeep.store.schema import audit


def test_anchor_then_verify_then_tampering_named(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert cli(home, "init").returncode == 0
    with tk.connect(home) as client:
        client.create_stream("a/s")
        for reason in ("one", "two", "three"):
            client.holds.add("stream", "a/s", reason)
        head = client.audit_head()
    out = tmp_path / "anchor.json"
    with ThreadPoolExecutor(max_workers=3) as pool:
        anchored, text, bad = pool.map(lambda args: cli(home, *args), [
            ("audit", "anchor", "--output", str(out), "--json"), ("audit", "anchor"),
            ("audit", "verify", "--anchor", "not-a-hash")])
    assert anchored.returncode == 0 and json.loads(anchored.stdout) == head
    assert json.loads(out.read_text()) == head and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert text.stdout.startswith(f"{head['hash']}  row 3  ")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "error: invalid anchor 'not-a-hash': expected a row hash of 64 hex digits, as 'tidekeep " \
                         "audit anchor' prints\n"

    with tk.connect(home) as client:
        client.holds.add("stream", "a/s", "after the anchor")
    verified = cli(home, "audit", "verify", "--anchor", head["hash"])
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.splitlines()[0] == "audit trail verified: 4 row(s), chain unbroken up to row 4"
    assert f"anchor {head['hash']}: row 3: the trail up to it is unchanged" in verified.stdout

    with tk.connect(home) as client, client.workspace.db.engine.begin() as conn:
        conn.execute(sa.update(audit).where(audit.c.id == 2).values(bytes_freed=1))
    with ThreadPoolExecutor(max_workers=2) as pool:
        text, as_json = pool.map(lambda args: cli(home, *args), [
            ("audit", "verify", "--anchor", head["hash"]), ("audit", "verify", "--json")])
    assert text.returncode == 19 and text.stderr == ""
    assert text.stdout.splitlines()[0] == ("audit trail BROKEN (changed) at row 2: row 2 was changed or moved: its "
                                           "hash does not match its content")
    assert "not in the verified trail" in text.stdout
    verdict = json.loads(as_json.stdout)
    assert as_json.returncode == 19 and not verdict["ok"] and verdict["broken"]["row_id"] == 2
    assert verdict["rows"] == 1 and verdict["head"]["id"] == 4
