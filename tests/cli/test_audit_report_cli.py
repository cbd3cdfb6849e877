"""`tidekeep audit report` (cli/audit_report.py, docs/audit-reports.md), run in the test process on
a seeded workspace: the JSON document is the store's report, --format csv prints its CSV, --output
writes JSON, CSV or PDF owner-only with the exact text, the summary shows the totals; bad input is
one error line and writes nothing; with --server the same report comes through the API."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.api_server import live_api
from tests.helpers.cli_runner import InProcess, assert_one_error_line, check_ok

import tidekeep as tk
from tidekeep.printable import printable
from tidekeep.store.audit import AuditEntry
from tidekeep.store.audit_report import report_document
from tidekeep.store.audit_report_render import report_csv, report_pdf, totals_line
from tidekeep.units import iso_utc

T0 = 1_700_000_000_000
MIN = 60_000
WINDOW = ("--since", str(T0), "--until", iso_utc(T0 + 10 * MIN))
GENERATED = ("generated", "generated_ms")


@pytest.fixture
def seeded(in_process: InProcess) -> Iterator[tk.Client]:
    """A workspace at the CLI's home: two truncations (one reason with control characters), a
    hold, an archive expiry row."""
    client = tk.connect(in_process.home, clock=tk.ManualClock(T0), settings={"writer.linger": 0}, create=True)
    for name, reason in (("ops/a", "cleanup"), ("ops/b", "two\nlines \x1b[2J")):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            writer.write_many([b"q" * 300] * 4)
        client.clock.advance(MIN)  # type: ignore[attr-defined]
        client.stream(name).truncate(client.stream(name).tail_cut(), reason=reason)
    client.holds.add("stream", "ops/a", "case 9")
    with client.workspace.db.write() as conn:
        client.workspace.audit.append(conn, AuditEntry("archive_expire", "archives/web", "expired", 123_456,
                                                       time_ms=T0 + 4 * MIN))
    yield client
    client.close()


def expected(client: tk.Client) -> dict[str, Any]:
    return report_document(client.audit_report(T0, T0 + 10 * MIN))


def without_generated(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in GENERATED}


def test_json_csv_and_the_summary_on_stdout(in_process: InProcess, seeded: tk.Client) -> None:
    document = expected(seeded)
    assert document["totals"]["deletions"] == 3 and document["holds"]
    for args in (("--json",), ("--format", "json"), ("--format", "json", "--json")):
        printed = check_ok(in_process("audit", "report", *WINDOW, *args)).json()
        assert without_generated(printed) == without_generated(document), args
    assert check_ok(in_process("--json", "audit", "report", *WINDOW)).json()["totals"] == document["totals"]
    # the CSV on stdout: each cell's control characters escaped, as every CLI line has them
    printed_csv = check_ok(in_process("audit", "report", *WINDOW, "--format", "csv")).stdout
    assert printed_csv == report_csv(document, printable)
    assert "\x1b" not in printed_csv and "two\\nlines \\x1b[2J" in printed_csv
    summary = check_ok(in_process("audit", "report", *WINDOW)).stdout.splitlines()
    assert summary[0].startswith("tidekeep deletion report: 2023-11-14T22:13:20.000Z to 2023-11-14T22:23:20.000Z")
    for family, totals in document["families"].items():
        assert totals_line(family, totals) in summary
    assert totals_line("total", document["totals"]) in summary
    assert f"signature: {document['signature']['row_hash']} (row {document['signature']['row_id']})" in summary
    assert "holds in force during the window: 1" in summary


def test_output_files_are_owner_only_and_exact(in_process: InProcess, seeded: tk.Client, tmp_path: Path) -> None:
    document = expected(seeded)
    for report_format, name in ((None, "r.json"), ("csv", "r.csv"), ("pdf", "r.pdf")):
        target = tmp_path / name
        args = ("--format", report_format) if report_format else ()
        done = check_ok(in_process("audit", "report", *WINDOW, *args, "--output", str(target)))
        chosen = report_format or "json"
        assert done.stdout == (f"wrote the deletion report ({chosen}) to {target}: "
                               f"{totals_line('total', document['totals'])}; signature "
                               f"{document['signature']['row_hash']}\n")
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        data = target.read_bytes()
        if chosen == "json":
            assert without_generated(json.loads(data)) == without_generated(document)
        elif chosen == "csv":
            assert data.decode("utf-8") == report_csv(document)  # exact: the ESC and newline kept
        else:
            assert data.startswith(b"%PDF-") and len(data) > 1000
    # --json with --output: what was written, as a document
    written = check_ok(in_process("audit", "report", *WINDOW, "--format", "pdf", "--output",
                                  str(tmp_path / "again.pdf"), "--json")).json()
    assert written == {"output": str(tmp_path / "again.pdf"), "format": "pdf", "families": document["families"],
                       "totals": document["totals"], "signature": document["signature"]}


def test_bad_input_is_one_line_and_writes_nothing(in_process: InProcess, seeded: tk.Client, tmp_path: Path) -> None:
    target = tmp_path / "never.pdf"
    for args, fragment in (
            (("--format", "pdf"), "--format pdf needs --output FILE"),
            (("--format", "csv", "--json"), "--json prints the JSON report, not CSV"),
            (("--format", "xml", "--output", str(target)), "invalid --format 'xml'"),
    ):
        assert_one_error_line(in_process("audit", "report", *WINDOW, *args), 2, fragment)
    for window, fragment in ((("--since", "tomorrow", "--until", "0"), "invalid --since 'tomorrow'"),
                             (("--since", "10", "--until", "9"), "since (1970-01-01T00:00:00.010Z) is after until"),
                             (("--since", "0", "--until", "99999999999999999"), "invalid until")):
        assert_one_error_line(in_process("audit", "report", *window, "--output", str(target)), 2, fragment)
    missing = in_process("audit", "report", "--since", "0")
    assert missing.code == 2 and "--until" in missing.stderr and "Traceback" not in missing.stderr
    assert not target.exists()


def test_through_the_server_the_same_report(in_process: InProcess, seeded: tk.Client, tmp_path: Path) -> None:
    with live_api(seeded.workspace) as api:
        env = {"TIDEKEEP_SERVER": api.url, "TIDEKEEP_TOKEN": api.token("auditor", "viewer")}
        scoped = {**env, "TIDEKEEP_TOKEN": api.token("ops-only", "viewer", "ops")}
        document = expected(seeded)  # after the tokens: creating one is audited, so it moves the signature
        remote = check_ok(in_process("audit", "report", *WINDOW, "--json", env=env)).json()
        assert without_generated(remote) == without_generated(document)
        assert remote["generated_ms"] == T0 + 2 * MIN  # the server's clock (the workspace's)
        printed = check_ok(in_process("audit", "report", *WINDOW, "--format", "csv", env=env)).stdout
        assert printed == check_ok(in_process("audit", "report", *WINDOW, "--format", "csv")).stdout
        check_ok(in_process("audit", "report", *WINDOW, "--format", "pdf", "--output", str(tmp_path / "r.pdf"),
                            env=env))
        assert (tmp_path / "r.pdf").read_bytes() == report_pdf(remote)
        mine = check_ok(in_process("audit", "report", *WINDOW, "--json", env=scoped)).json()
        assert mine["scope"] == "ops" and list(mine["families"]) == ["streams"]
        assert mine["totals"] == {"deletions": 2, "bytes": document["families"]["streams"]["bytes"]}
