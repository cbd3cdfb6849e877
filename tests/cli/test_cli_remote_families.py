"""The CLI with --server for retention, holds, audit, the catalog and archive search: each command runs as a real
`tidekeep` subprocess against a live API and prints what the local command prints on the same
workspace (test_cli_remote.py has the stream commands and the `Sides` fixture). SQLite only: the
subject is the CLI's remote path, not the metadata backend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_cli_remote import Sides, renamed
from tests.helpers.api_server import live_api
from tests.helpers.archives import make_archive
from tests.helpers.cli_runner import assert_one_error_line, check_ok

import tidekeep as tk


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[Sides]:
    """test_cli_remote.py's two sides, on SQLite only."""
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"),
                        settings={"writer.linger": 0}, create=True)
    try:
        with live_api(client.workspace) as api:
            yield Sides(api, client, tmp_path, url)
    finally:
        client.close()


# a time well after every write of the test: `retention preview --at` decides as of it on both sides
LATER_MS = 4_102_444_800_000  # 2100-01-01


def write_bytes(client: tk.Client, stream: str, count: int) -> None:
    """`count` 10-byte events into one segment."""
    with client.stream(stream).writer("w") as writer:
        for _ in range(count):
            writer.write(b"xx", routing_key="k")


def both_json(sides: Sides, token: str, *args: str) -> tuple[Any, Any]:
    remote = check_ok(sides.remote(*args, "--json", token=token)).json()
    return remote, check_ok(sides.local(*args, "--json")).json()


def same_text(sides: Sides, token: str, *args: str) -> str:
    remote = check_ok(sides.remote(*args, token=token)).stdout
    assert remote == check_ok(sides.local(*args)).stdout, args
    return remote


def without(document: Any, *names: str) -> Any:
    """`document` (a dict, or a list of them) without the keys `names`, at any depth."""
    if isinstance(document, dict):
        return {k: without(v, *names) for k, v in document.items() if k not in names}
    if isinstance(document, list):
        return [without(v, *names) for v in document]
    return document


def test_retention_preview_run_history_and_subscribers(sides: Sides) -> None:
    operator, viewer = sides.token("operator"), sides.token("viewer")
    for name in ("r/a", "r/b"):
        sides.client.create_stream(name, tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(100, 300)))
        write_bytes(sides.client, name, 30)
        sides.client.stream(name).retention.run()  # records the tail: the retention set has a cut
        write_bytes(sides.client, name, 30)
    check_ok(sides.local("rg", "create", "slow", "--stream", "r/a", "--retention-type",
                         "MANUAL_RELEASE_AT_USER_STREAMCUT"))

    for at in (str(LATER_MS), "2100-01-01T00:00:00Z"):
        remote, local = both_json(sides, viewer, "retention", "preview", "r/a", "--at", at)
        assert remote == local and remote["dry_run"] and remote["now_ms"] == LATER_MS
        same_text(sides, viewer, "retention", "preview", "r/a", "--at", at)
    # relative to each side's own now: the same decision, at a time a few milliseconds apart
    remote, local = both_json(sides, viewer, "retention", "preview", "r/b", "--at", "+1h")
    relative = ("now_ms", "recording_time_ms", "age_ms")
    assert without(remote, *relative) == without(local, *relative)

    remote_subs, local_subs = both_json(sides, viewer, "retention", "subscribers", "r/a")
    assert remote_subs == local_subs and [s["reader_group"] for s in remote_subs] == ["slow"]
    same_text(sides, viewer, "retention", "subscribers", "r/a")
    same_text(sides, viewer, "retention", "subscribers", "r/b")  # none

    # a run on each of two streams set up alike: the same decision, the same truncation
    remote_run = check_ok(sides.remote("retention", "run", "r/b", "--json", token=operator)).json()
    sides.client.create_stream("r/c", tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(100, 300)))
    write_bytes(sides.client, "r/c", 30)
    sides.client.stream("r/c").retention.run()
    write_bytes(sides.client, "r/c", 30)
    local_run = check_ok(sides.local("retention", "run", "r/c", "--json")).json()
    times = ("now_ms", "recording_time_ms", "updated_ms", "age_ms")
    assert renamed(without(remote_run, *times), "r/b", "r/b") == renamed(without(local_run, *times), "r/c", "r/b")
    assert remote_run["freed_bytes"] > 0

    remote_history, local_history = both_json(sides, viewer, "retention", "history", "r/b")
    assert remote_history == local_history and len(remote_history) == 1
    assert remote_history[0]["actor"] == "operator"  # the token the run came through
    same_text(sides, viewer, "retention", "history", "r/b")
    same_text(sides, viewer, "retention", "history", "r/a")  # none
    assert both_json(sides, viewer, "retention", "history", "r/b", "--limit", "1")[0] == remote_history

    assert_one_error_line(sides.remote("retention", "run", "r/missing", token=operator), 3, "r/missing")
    assert_one_error_line(sides.remote("retention", "run", "r/a", token=viewer), 18, "operator")
    assert_one_error_line(sides.remote("retention", "preview", "r/a", "--at", "soon", token=viewer), 2, "soon")


def test_holds_and_the_audit_trail(sides: Sides) -> None:
    legal, operator, viewer = sides.token("legal"), sides.token("operator"), sides.token("viewer")
    sides.client.create_stream("h/a")
    write_bytes(sides.client, "h/a", 10)
    cut = check_ok(sides.remote("stream", "truncate", "h/a", "tail", "--reason", "cleanup", token=operator))
    assert cut.stdout

    added = check_ok(sides.remote("hold", "add", "stream", "h/a", "--reason", "case 7", "--json", token=legal)).json()
    assert (added["kind"], added["target"], added["reason"], added["created_by"]) == ("stream", "h/a", "case 7",
                                                                                       "legal")
    text = check_ok(sides.remote("hold", "add", "records", 'feed = "A"', "--reason", "case 8", token=legal)).stdout
    local_text = check_ok(sides.local("hold", "add", "records", 'feed = "A"', "--reason", "case 8")).stdout
    assert text == local_text.replace("hold 3 ", "hold 2 ") == 'hold 2 added on records feed = "A" (case 8)\n'

    listed, local_listed = both_json(sides, viewer, "hold", "list")
    assert listed == local_listed and [h["target"] for h in listed] == ["h/a", 'feed = "A"', 'feed = "A"']
    same_text(sides, viewer, "hold", "list")
    for filtered in (["--kind", "records"], ["--target", "h/a"], ["--kind", "archive"]):
        remote, local = both_json(sides, viewer, "hold", "list", *filtered)
        assert remote == local, filtered
        same_text(sides, viewer, "hold", "list", *filtered)

    # a held stream is not truncated: the local command's one line and exit code
    write_bytes(sides.client, "h/a", 5)
    before = sides.client.stream("h/a").describe()
    held = sides.remote("stream", "truncate", "h/a", "tail", "--reason", "again", token=operator)
    local_held = sides.local("stream", "truncate", "h/a", "tail", "--reason", "again")
    assert_one_error_line(held, 10, "hold")
    assert (held.code, held.stderr) == (local_held.code, local_held.stderr)
    assert sides.client.stream("h/a").describe() == before

    removed = check_ok(sides.remote("hold", "remove", str(added["id"]), "--json", token=legal)).json()
    assert removed == added
    text = check_ok(sides.remote("hold", "remove", "2", token=legal)).stdout
    assert text == check_ok(sides.local("hold", "remove", "3")).stdout.replace("hold 3 ", "hold 2 ")
    assert check_ok(sides.remote("hold", "list", "--json", token=viewer)).json() == []

    assert_one_error_line(sides.remote("hold", "remove", "99", token=legal), 3, "99")
    assert_one_error_line(sides.remote("hold", "add", "stream", "h/a", "--reason", "x", token=viewer), 18, "legal")
    assert check_ok(sides.remote("hold", "list", "--json", token=viewer)).json() == []

    # the audit trail: the same records both ways, the remote actions under the token's name
    for args in ([], ["--stream", "h/a"], ["--limit", "2"], ["--stream", "h/a", "--limit", "1"]):
        remote, local = both_json(sides, viewer, "audit", "list", *args)
        assert remote == local, args
        same_text(sides, viewer, "audit", "list", *args)
    trail = check_ok(sides.remote("audit", "list", "--json", token=viewer)).json()
    assert [(r["action"], r["actor"]) for r in trail if r["actor"] in ("legal", "operator")][-3:] == [
        ("hold_add", "legal"), ("hold_add", "legal"), ("truncate", "operator")]
    assert_one_error_line(sides.remote("audit", "list", "--limit", "0", token=viewer), 2, "--limit")


RULES = {"rules": [
    {"number": 1, "name": "Keep special data", "expression": 'feed = "SPECIAL_DATA"', "age": "forever"},
    {"number": 2, "name": "Internal logs", "expression": 'feed = "INTERNAL_LOGS"', "age": "1 days"},
]}
# the parts of a run's report that depend on the time it ran
RUN_TIMES = ("run_id", "now_ms", "elapsed_s", "from_ms", "to_ms")


def test_catalog_explain_impact_and_run(sides: Sides, tmp_path: Path) -> None:
    operator, viewer = sides.token("operator"), sides.token("viewer")
    records = [{"feed": feed, "type": "Raw Events", "create_time": f"2024-01-0{day}T00:00:00Z", "file_size": 100}
               for feed in ("INTERNAL_LOGS", "SPECIAL_DATA", "OTHER") for day in (1, 2)]
    ids = check_ok(sides.local("catalog", "add", json.dumps(records), "--json")).json()["ids"]
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    check_ok(sides.local("catalog", "rules", "set", str(rules)))

    # the CLI has no --now, so each side decides at its own now: the parts that do not depend on it
    remote, local = both_json(sides, operator, "catalog", "impact")
    assert without(remote, "now_ms") == without(local, "now_ms")
    assert (remote["total_rows"], remote["total_bytes"]) == (2, 200)

    remote, local = both_json(sides, operator, "catalog", "run", "--dry-run")
    assert without(remote, *RUN_TIMES) == without(local, *RUN_TIMES)
    assert (remote["dry_run"], remote["rows"], remote["by_rule"]["2"]["rows"]) == (True, 2, 2)

    run = check_ok(sides.remote("catalog", "run", "--json", token=operator)).json()
    assert without(run, *RUN_TIMES, "dry_run") == without(remote, *RUN_TIMES, "dry_run") and not run["dry_run"]
    text = check_ok(sides.remote("catalog", "run", token=operator)).stdout  # trackers: nothing more to delete
    assert text.startswith("run ") and ": deleted 0 record(s)" in text.splitlines()[0]

    for record_id in ids:  # deleted, retained by rule 1, retained by no rule
        remote, local = both_json(sides, viewer, "catalog", "explain", str(record_id))
        assert without(remote, "now_ms") == without(local, "now_ms"), record_id
        same_text(sides, viewer, "catalog", "explain", str(record_id))
    assert check_ok(sides.remote("catalog", "explain", str(ids[0]), "--json", token=viewer)).json()["status"] == (
        "DELETED")

    assert_one_error_line(sides.remote("catalog", "explain", "999", token=viewer), 3, "999")
    assert_one_error_line(sides.remote("catalog", "run", token=viewer), 18, "operator")
    assert_one_error_line(sides.remote("catalog", "impact", "--rules", str(rules), token=operator), 2, "--rules")


# the parts of a search job that differ between two runs of the same search
SEARCH_RUN = ("id", "created_ms", "completed_ms", "heartbeat_ms", "results_path", "actor")


def test_archives_search_through_the_server(sides: Sides, spark: Any) -> None:
    minute_ago = sides.client.clock.now_ms() - 60_000  # data times: inside the default archive retention
    for i in range(2):
        make_archive(sides.client, "app", [(minute_ago + i * 1000 + k, f"hit {i}.{k}") for k in range(3)]
                     + [(minute_ago - 1000, "miss")])
    args = ("archives", "search", "app", "HIT *", "--ignore-case", "--page-size", "4")
    remote = check_ok(sides.remote(*args, "--json", token=sides.token("operator"))).json()
    searched = sides.local(*args, "--json")  # its own Spark: the JVM may say something on stderr
    assert searched.code == 0, searched.stderr
    local = searched.json()
    assert without(remote, *SEARCH_RUN) == without(local, *SEARCH_RUN)
    assert remote["job"]["state"] == "SUCCEEDED" and remote["total"] == 6 and len(remote["rows"]) == 4
    assert remote["job"]["actor"] == "operator"  # the search ran as the token
    assert_one_error_line(sides.remote("archives", "search", "nope", "x", token=sides.token("operator")), 3,
                          "nope")


def test_stream_compaction_through_the_server_is_the_local_command(sides: Sides) -> None:
    operator = sides.token("operator")
    # a bad size is refused even when there is no stream to compact
    assert_one_error_line(sides.local("stream", "compact", "--target-size", "0"), 2, "target size")
    assert_one_error_line(sides.remote("stream", "compact", "--target-size", "2GiB", token=operator), 2,
                          "at most 1GiB")
    sides.client.create_stream("c/a", tk.StreamConfig(segments=2))
    with sides.client.stream("c/a").writer("w") as writer:
        for i in range(12):
            writer.write(f"event {i}".encode(), routing_key=f"k{i % 4}")
            writer.flush()
    before = check_ok(sides.local("stream", "describe", "c/a", "--json")).json()["chunks"]
    assert before["count"] == 12 and before["compacted"] == 0
    compacted = check_ok(sides.remote("stream", "compact", "c/a", "--json", token=operator)).json()
    assert compacted == {"streams": [{"stream": "c/a", "chunks_before": 12, "chunks_after": 2, "groups_merged": 2,
                                      "groups_skipped": 0, "bytes_merged": before["segments"]["0.0"]["bytes"]
                                      + before["segments"]["0.1"]["bytes"]}]}
    remote, local = both_json(sides, operator, "stream", "describe", "c/a")
    assert remote == local and local["chunks"]["count"] == 2 and local["chunks"]["compacted"] == 2
    # nothing left to merge: the same text on both sides, and every stream when none is named
    assert same_text(sides, operator, "stream", "compact").splitlines()[1].split() == ["c/a", "2", "2", "0", "0",
                                                                                        "bytes", "0"]
    again = check_ok(sides.local("stream", "compact", "--json")).json()["streams"]
    assert [(r["stream"], r["groups_merged"]) for r in again] == [("c/a", 0)]
    viewer = sides.remote("stream", "compact", "c/a", token=sides.token("viewer"))
    assert viewer.code != 0 and len(viewer.stderr.splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("retention", "preview", "r/a", "--at", "soon"),
    ("retention", "preview", "r/a", "--at", "+5parsecs"),
    ("retention", "history", "r/a", "--limit", "0"),
    ("hold", "add", "stream", "nosl", "--reason", "r"),
    ("hold", "add", "records", "feed = ", "--reason", "r"),
    ("hold", "list", "--kind", "bogus"),
    ("hold", "remove", "0"),
    ("audit", "list", "--stream", "noslash"),
    ("audit", "list", "--limit", "0"),
    ("catalog", "explain", "0"),
    ("stream", "compact", "r/a", "--target-size", "0"),
    ("stream", "compact", "r/a", "--target-size", "lots"),
    ("stream", "compact", "r/missing"),
])
def test_bad_input_is_the_local_commands_line(sides: Sides, args: tuple[str, ...]) -> None:
    """Checked before the request where the local command checks it, so the line names the option
    (`--at`, `--limit`) or the id as the local command does, not the API's parameter."""
    sides.client.create_stream("r/a")
    remote = sides.remote(*args, token=sides.token("admin"))
    local = sides.local(*args)
    assert local.code in (2, 3) and len(local.stderr.splitlines()) == 1, local.stderr
    assert (remote.code, remote.stderr, remote.stdout) == (local.code, local.stderr, "")
