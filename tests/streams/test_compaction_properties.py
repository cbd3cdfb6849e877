"""Random interleavings of writes, transactions, truncations, compactions and sweeps on two streams
that take the same writes: one is compacted, the other never. After every step the compacted stream
reads exactly what the uncompacted one reads — whole, between any two cuts taken on the way, and as
Arrow — and after a sweep its storage holds exactly the files its metadata names."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from helpers.storage import referenced_paths, stored_files

KEYS = [f"k{i}" for i in range(6)]  # keyed events route the same way on both streams

write_op = st.tuples(st.just("write"), st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 40)), min_size=1,
                                                  max_size=6), st.booleans())
step = st.one_of(
    write_op,
    st.tuples(st.just("txn"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=5)),
    st.tuples(st.just("truncate"), st.integers(0, 1000)),
    st.tuples(st.just("compact"), st.sampled_from([1, 40, 120, 400, 1 << 20])),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("scale")),
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tk.Client, tk.ManualClock]]:
    home = Path(tmp_path_factory.mktemp("compaction-properties"))
    # both streams' commits get the same times; it starts at the files' real times, which the sweep
    # compares with it, and moves only before a sweep
    clock = tk.ManualClock(int(time.time() * 1000))
    with tk.connect(home=home / "ws", storage=str(home / "data"), clock=clock, settings={"writer.linger": 0},
                    create=True) as client:
        yield client, clock


counter = itertools.count()


def rows(handle: tk.Stream, start: object = None, end: object = None) -> list[tuple[object, ...]]:
    return [tuple(e) for e in handle.read(start, end)]  # type: ignore[arg-type]


def cut_text(handle: tk.Stream, cut: tk.StreamCut) -> str:
    """The same positions as a cut of `handle`'s stream (both streams have the same segments)."""
    return f"{handle.name}:{str(cut).split(':', 1)[1].split('@')[0]}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=3, max_size=12))
def test_a_compacted_stream_reads_exactly_what_the_uncompacted_one_reads(
        shared: tuple[tk.Client, tk.ManualClock], steps: list[tuple[object, ...]]) -> None:
    client, clock = shared
    n = next(counter)
    names = (f"p/compacted{n}", f"p/plain{n}")
    for name in names:
        client.create_stream(name, tk.StreamConfig(segments=2))
    compacted, plain = (client.stream(name) for name in names)
    cuts: list[tk.StreamCut] = [plain.head_cut()]  # cuts of the plain stream, taken on the way
    for number, op in enumerate(steps):
        kind = op[0]
        if kind == "write":
            events, one_batch = op[1], op[2]
            for handle in (compacted, plain):
                with handle.writer("w") as writer:
                    for i, (key, size) in enumerate(events):
                        writer.write(f"{number}.{i}:".encode() + b"x" * size, key)
                        if not one_batch:
                            writer.flush()
        elif kind == "txn":
            for handle in (compacted, plain):
                txn = handle.transactional_writer("t").begin()
                for i, key in enumerate(op[1]):
                    txn.write(f"txn {number}.{i}".encode(), key)
                txn.commit(timestamp=number)
        elif kind == "truncate":
            head = plain.head_cut()
            ahead = [c for c in cuts if _not_behind(plain, head, c)]
            if ahead:
                cut = ahead[op[1] % len(ahead)]
                for handle in (compacted, plain):
                    handle.truncate(cut_text(handle, cut))
        elif kind == "compact":
            compacted.compact(op[1])
        elif kind == "sweep":
            clock.advance(3_600_000)  # every file is older than the clock now
            client.sweep(grace=0)
            assert stored_files(client) == referenced_paths(client)
        elif kind == "scale":
            for handle in (compacted, plain):
                active = [s for s in handle.describe()["segments"] if not s["sealed"]]
                handle.split(active[0]["segment"], 2)
        cuts.append(plain.tail_cut())
        assert rows(compacted) == rows(plain), f"after step {number}: {op}"

    head = plain.head_cut()
    readable = [c for c in cuts if _not_behind(plain, head, c)]
    for start, end in itertools.combinations(readable, 2):
        if _not_behind(plain, start, end):
            assert rows(compacted, cut_text(compacted, start), cut_text(compacted, end)) == \
                rows(plain, cut_text(plain, start), cut_text(plain, end))
    batches = [list(h.read_batches()) for h in (compacted, plain)]
    tables = [pa.Table.from_batches(b).drop_columns(["stream"]) if b else None for b in batches]
    assert (tables[0] is None and tables[1] is None) or (tables[0] is not None and tables[0].equals(tables[1]))


def _not_behind(handle: tk.Stream, start: tk.StreamCut, end: tk.StreamCut) -> bool:
    """Whether `end` is at or after `start` in every segment (a read from start to end is valid)."""
    try:
        handle.size_between(start, end)
    except tk.InvalidStreamCut:
        return False
    return True
