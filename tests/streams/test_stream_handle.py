"""The public API's one shape: `client.stream(name)` is a stream's handle (cuts, data, truncation,
scaling, its retention and watermarks as sub-namespaces), the client keeps its internals private and
offers each operation once, `client.workspace` is the extension point below it, every public method
of the facades is typed (no Any returns), and `import tidekeep as tk` exports the value types the
catalog and archives return."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.store.chunks import ChunkStorage
from tidekeep.store.database import Database

STREAM = "sc/s"
OTHER = "sc/other"


def write(client: tk.Client, name: str, count: int, size: int = 10) -> None:
    with client.stream(name).writer("w1", linger=0) as writer:
        for i in range(count):
            writer.write(bytes([65 + i % 26]) * size, routing_key=f"k{i % 3}")


def test_a_handle_does_what_the_stream_operations_do(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    stream = client.stream(STREAM)
    assert stream.name == STREAM and repr(stream) == "Stream('sc/s')"
    head = stream.head_cut()
    write(client, STREAM, 12)
    tail = stream.tail_cut()
    written = sum(tail.positions.values())  # the segments were empty: every byte is between head and tail
    assert written > 12 * 10
    assert stream.size_between(head, tail) == written == stream.size_between(str(head), str(tail))
    assert sorted(e.payload for e in stream.read(end=tail)) == sorted(bytes([65 + i]) * 10 for i in range(12))
    assert sum(b.num_rows for b in stream.read_batches(end=tail)) == 12
    assert stream.resolve_cut(str(tail)) == tail
    assert stream.describe()["name"] == STREAM and stream.state().info.state == "ACTIVE"
    created = stream.split("0.0", 2)
    assert len(created) == 2 and len(stream.state().active_segments()) == 3
    result = stream.truncate(tail)
    assert result.new_head == stream.head_cut() and client.audit(STREAM)[0]["action"] == "truncate"
    assert stream.size_between(stream.head_cut(), stream.tail_cut()) == 0
    assert stream.seal() is True and stream.state().info.state == "SEALED"
    assert stream.delete().bytes_freed == 0
    assert STREAM not in [s.name for s in client.list_streams()]


def test_a_handle_reads_nothing_until_used(client: tk.Client) -> None:
    absent = client.stream("sc/absent")  # no stream, no scope: making the handle is fine
    with pytest.raises(tk.NotFound):
        absent.state()
    with pytest.raises(tk.NotFound):
        absent.head_cut()
    with pytest.raises(tk.InvalidName):
        client.stream("no-scope").describe()


def test_size_between_takes_only_cuts_of_its_stream(client: tk.Client) -> None:
    client.create_stream(STREAM)
    client.create_stream(OTHER)
    write(client, STREAM, 3)
    head, tail = client.stream(STREAM).head_cut(), client.stream(STREAM).tail_cut()
    theirs = client.stream(OTHER).head_cut()
    with pytest.raises(tk.InvalidStreamCut, match="different streams"):
        client.stream(STREAM).size_between(head, theirs)
    with pytest.raises(tk.InvalidStreamCut, match="the cuts are for 'sc/s', not 'sc/other'"):
        client.stream(OTHER).size_between(head, tail)
    with pytest.raises(tk.InvalidStreamCut, match="is not at or before"):
        client.stream(STREAM).size_between(tail, head)


def test_retention_and_watermarks_are_the_streams_own(tmp_path: Path, metadata_url: str) -> None:
    clock = tk.ManualClock(1_000_000)
    with tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(0, 50)))
        client.create_stream(OTHER, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(0, 50)))
        write(client, STREAM, 10)
        write(client, OTHER, 10)
        stream = client.stream(STREAM)
        preview = stream.retention.preview()
        assert preview == client.stream(STREAM).retention.preview() and preview.truncates
        ran = stream.retention.run()
        assert ran.truncates and stream.retention.records() == client.stream(STREAM).retention.records()
        assert [h["target"] for h in stream.retention.history()] == [STREAM]
        assert client.stream(OTHER).retention.history() == []  # the other stream's retention did not run

        mark = stream.watermarks.note("w1", 5_000)
        assert mark.time_ms == 5_000 and stream.watermarks.marks() == [mark]
        assert [w.mark for w in stream.watermarks.writers()] == [mark]
        computed = stream.watermarks.compute()
        assert computed is not None and stream.watermarks.latest() == computed
        assert stream.watermarks.list() == [computed] == stream.watermarks.tail(5)
        assert stream.watermarks.get(computed.revision) == computed
        assert client.stream(OTHER).watermarks.latest() is None and client.stream(OTHER).watermarks.marks() == []
        assert stream.watermarks.prune() == 0 and stream.watermarks.close_writer("w1") is True


def test_a_transactional_writer_from_the_handle(client: tk.Client) -> None:
    client.create_stream(STREAM)
    writer = client.stream(STREAM).transactional_writer("t1")
    txn = writer.begin()
    txn.write(b"x", routing_key="k")
    txn.commit()
    assert [t.state for t in client.transactions.list(STREAM)] == ["COMMITTED"]
    assert [e.payload for e in client.stream(STREAM).read()] == [b"x"]


def test_the_client_keeps_its_internals_private_and_each_operation_once(client: tk.Client) -> None:
    public = {name for name in dir(client) if not name.startswith("_")}
    assert not public & {"db", "storage", "streams"}
    moved = {"stream_state", "describe_stream", "seal_stream", "delete_stream", "update_stream", "head_cut",
             "tail_cut", "resolve_cut", "size_between", "truncate", "writer", "read", "read_batches",
             "transactional_writer", "scale", "split", "merge", "subscribers", "list_transactions",
             "abort_transaction", "expire_transactions", "retention", "watermarks"}
    assert not public & moved
    assert not hasattr(client.catalog, "hold")  # holds are added in one place: client.holds.add


def test_the_workspace_is_the_extension_point(client: tk.Client) -> None:
    workspace = client.workspace
    assert isinstance(workspace, tk.Workspace)
    assert isinstance(workspace.db, Database) and isinstance(workspace.storage, ChunkStorage)
    assert workspace.settings is client.settings and workspace.clock is client.clock
    assert workspace.workspace_id == client.workspace_id is not None
    assert workspace.db is client.workspace.db  # one database, one storage, not a copy per access
    with pytest.raises(AttributeError):
        workspace.db = None  # type: ignore[misc]


FACADES = [tk.Client, tk.Stream, tk.StreamRetention, tk.StreamWatermarks, tk.Catalog, tk.Archives]


@pytest.mark.parametrize("facade", FACADES, ids=lambda f: f.__name__)
def test_every_public_method_says_what_it_returns(facade: type) -> None:
    for name, member in inspect.getmembers(facade, inspect.isfunction):
        if name.startswith("_"):
            continue
        returned = inspect.signature(member).return_annotation
        assert returned is not inspect.Signature.empty, f"{facade.__name__}.{name} has no return type"
        assert returned not in ("Any", "typing.Any"), f"{facade.__name__}.{name} returns Any"


def test_tk_exports_the_catalog_and_archive_value_types() -> None:
    from tidekeep.archives.gc import GcReport
    from tidekeep.archives.model import Archive, SearchJob
    from tidekeep.catalog.job import RunReport
    from tidekeep.catalog.records import MetaRecord
    from tidekeep.catalog.rules import RetentionRule, RuleSet

    assert (tk.MetaRecord, tk.RetentionRule, tk.RuleSet, tk.RunReport) == (MetaRecord, RetentionRule, RuleSet,
                                                                           RunReport)
    assert (tk.Archive, tk.SearchJob, tk.GcReport) == (Archive, SearchJob, GcReport)
    assert all(hasattr(tk, name) for name in tk.__all__)
    with pytest.raises(AttributeError):
        tk.NoSuchName  # noqa: B018
