"""Worker processes for crash and concurrency tests: `python tests/helpers/workers.py <command> ...`.

Settings come from the environment (TIDEKEEP_HOME, TIDEKEEP_METADATA_URL, TIDEKEEP_STORAGE_URI,
and TIDEKEEP_FAULT for a crash at a named fault point). A worker that breaks a rule it checks
prints why and exits 1; a fault point exits 77.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

import tidekeep as tk

PROBLEM_EXIT_CODE = 1


# ---- payloads shared with the tests --------------------------------------------------------------
def batch_events(writer_id: str, sequence: int, count: int) -> list[tuple[bytes, str | None]]:
    """The events of batch `sequence` of a writer: payload "writer:sequence:i", five routing keys."""
    return [(f"{writer_id}:{sequence}:{i}".encode(), f"k{i % 5}") for i in range(count)]


def keyed_payload(writer_id: str, key: str, number: int) -> bytes:
    return f"{writer_id}|{key}|{number}".encode()


def parse_keyed_payload(payload: bytes) -> tuple[str, str, int]:
    writer_id, key, number = payload.decode().split("|")
    return writer_id, key, int(number)


def check_per_key_runs(events: Iterable[tk.Event], from_zero: bool = True) -> dict[tuple[str, str], tuple[int, int]]:
    """Each (writer, key) must appear as consecutive numbers n, n+1, n+2, ... in order, without gaps
    or repeats (n = 0 unless the stream may have been truncated): what a consistent read of in-order,
    atomically committed batches looks like. Returns (first, next) per (writer, key); raises
    ValueError on the first violation."""
    runs: dict[tuple[str, str], tuple[int, int]] = {}
    for event in events:
        writer_id, key, number = parse_keyed_payload(event.payload)
        if event.routing_key != key or event.writer_id != writer_id:
            raise ValueError(f"event {event.payload!r} carries routing key {event.routing_key!r} and writer "
                             f"{event.writer_id!r}")
        first, due = runs.get((writer_id, key), (0 if from_zero else number, 0 if from_zero else number))
        if number != due:
            raise ValueError(f"writer {writer_id} key {key}: read number {number} where {due} was due "
                             f"(segment {event.segment}, offset {event.offset})")
        runs[(writer_id, key)] = (first, due + 1)
    return runs


def check_per_key_prefix(events: Iterable[tk.Event]) -> dict[tuple[str, str], int]:
    """check_per_key_runs from 0: the count per (writer, key)."""
    return {wk: end for wk, (_, end) in check_per_key_runs(events).items()}


# ---- commands ------------------------------------------------------------------------------------
def write_batches(args: argparse.Namespace) -> None:
    """Commit batches first_seq, first_seq+1, ... with explicit sequence numbers."""
    with tk.connect(create=True) as client:
        writer = client.stream(args.stream).writer(args.writer)
        for sequence in range(args.first_seq, args.first_seq + args.batches):
            appended = writer.write_batch(batch_events(args.writer, sequence, args.per_batch), sequence=sequence)
            print(f"batch {sequence}: {'appended' if appended else 'duplicate'}", flush=True)
        writer.close()


def truncate(args: argparse.Namespace) -> None:
    with tk.connect(create=True) as client:
        client.stream(args.stream).truncate(args.cut, reason="crash test")


def delete(args: argparse.Namespace) -> None:
    with tk.connect(create=True) as client:
        client.stream(args.stream).delete()


def compact(args: argparse.Namespace) -> None:
    """Compact the stream once, or again and again until the stop file appears (then once more);
    report the results."""
    results = []
    with tk.connect(create=True) as client:
        while True:
            finished = args.stop_file is None or Path(args.stop_file).exists()
            results.append(client.stream(args.stream).compact(args.target_size).to_dict())
            if finished:
                break
            time.sleep(args.pace)
    if args.report:
        Path(args.report).write_text(json.dumps(results))


def concurrent_writer(args: argparse.Namespace) -> None:
    """Write keyed events until the stop file appears (or max_events), then close and report what
    was committed. Each key's events are numbered 0, 1, 2, ... in write order."""
    stop_file = Path(args.stop_file)
    keys = [f"k{i}" for i in range(args.keys)]
    rng = random.Random(args.writer)
    numbers = dict.fromkeys(keys, 0)
    written = 0
    with tk.connect(create=True) as client:
        writer = client.stream(args.stream).writer(args.writer, batch_size=args.batch_size)
        while written < args.max_events and not (written % 20 == 0 and stop_file.exists()):
            key = rng.choice(keys)
            writer.write(keyed_payload(args.writer, key, numbers[key]), routing_key=key)
            numbers[key] += 1
            written += 1
            time.sleep(args.pace)
        writer.close()  # flushes: after this everything written is committed
    Path(args.report).write_text(json.dumps({"counts": numbers, "written": written}))


def shared_writer(args: argparse.Namespace) -> None:
    """Write `events` events "<tag>:<i>" under a writer id another process uses too, flushing each;
    after each flush that returned, append the events it acknowledged to the ack file. A fenced writer
    (the other process opened the id since) hands its unflushed events to a new writer, which fences
    the other in turn. Waits for the go file after the first open, so both processes have opened."""
    ack_file = Path(args.ack_file)
    go_file = Path(args.go_file)
    fenced = 0
    with tk.connect(create=True) as client:
        writer = client.stream(args.stream).writer(args.writer)
        Path(args.ready_file).touch()
        while not go_file.exists():
            time.sleep(0.005)
        acknowledged = 0
        for i in range(args.events):
            writer.write(f"{args.tag}:{i}".encode(), routing_key=args.tag)
            while True:
                try:
                    writer.flush()
                    break
                except tk.WriterFenced:
                    fenced += 1
                    carried = writer.unflushed()
                    writer = client.stream(args.stream).writer(args.writer)
                    for payload, key in carried:
                        writer.write(payload, routing_key=key)
            with ack_file.open("a") as handle:  # everything written so far is in the stream now
                handle.write("".join(f"{args.tag}:{n}\n" for n in range(acknowledged, i + 1)))
            acknowledged = i + 1
        try:
            writer.close()
        except tk.WriterFenced:
            fenced += 1  # nothing was pending: close only leaves watermark aggregation
    Path(args.report).write_text(json.dumps({"fenced": fenced}))


def reader(args: argparse.Namespace) -> None:
    """Read head to tail again and again until the done file appears (then once more), checking
    per-key order within each writer on every pass, and that no pass goes back behind the one
    before; report each pass's size. With --truncating, the head may move: a pass that meets
    TruncatedData is retried, and each key's run may start above 0."""
    done_file = Path(args.done_file)
    sizes: list[int] = []
    retries = 0
    previous: dict[tuple[str, str], tuple[int, int]] = {}
    with tk.connect(create=True) as client:
        while True:
            finished = done_file.exists()
            try:
                runs = check_per_key_runs(client.stream(args.stream).read(), from_zero=not args.truncating)
            except tk.TruncatedData:
                if not args.truncating:
                    raise
                retries += 1
                continue
            for wk, (first, end) in previous.items():
                now_first, now_end = runs.get(wk, (end, end))
                if now_first < first or now_end < end:
                    raise ValueError(f"writer {wk[0]} key {wk[1]}: a pass read [{now_first}, {now_end}) after a "
                                     f"pass had read [{first}, {end})")
            previous = runs
            sizes.append(sum(end - first for first, end in runs.values()))
            if finished:
                break
            time.sleep(0.005)  # leave the two cores to the writers now and then
    Path(args.report).write_text(json.dumps({"sizes": sizes, "truncated_retries": retries}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workers")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("write-batches")
    p.add_argument("--stream", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--first-seq", type=int, required=True)
    p.add_argument("--batches", type=int, default=1)
    p.add_argument("--per-batch", type=int, default=10)
    p.set_defaults(run=write_batches)
    p = commands.add_parser("truncate")
    p.add_argument("--stream", required=True)
    p.add_argument("--cut", required=True)
    p.set_defaults(run=truncate)
    p = commands.add_parser("delete")
    p.add_argument("--stream", required=True)
    p.set_defaults(run=delete)
    p = commands.add_parser("compact")
    p.add_argument("--stream", required=True)
    p.add_argument("--target-size", default="1MiB")
    p.add_argument("--stop-file", default=None, help="compact until this file exists")
    p.add_argument("--pace", type=float, default=0.01, help="seconds between compactions")
    p.add_argument("--report", default=None)
    p.set_defaults(run=compact)
    p = commands.add_parser("concurrent-writer")
    p.add_argument("--stream", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--keys", type=int, default=10)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--max-events", type=int, default=6000)
    p.add_argument("--batch-size", default="2KiB")
    p.add_argument("--pace", type=float, default=0.001, help="seconds to sleep after each event")
    p.set_defaults(run=concurrent_writer)
    p = commands.add_parser("shared-writer")
    p.add_argument("--stream", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--events", type=int, default=40)
    p.add_argument("--ack-file", required=True)
    p.add_argument("--ready-file", required=True)
    p.add_argument("--go-file", required=True)
    p.add_argument("--report", required=True)
    p.set_defaults(run=shared_writer)
    p = commands.add_parser("reader")
    p.add_argument("--stream", required=True)
    p.add_argument("--done-file", required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--truncating", action="store_true", help="the head may move while reading")
    p.set_defaults(run=reader)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except Exception:
        traceback.print_exc()
        return PROBLEM_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main())
