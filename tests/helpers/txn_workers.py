"""Transaction worker processes for crash tests: `python tests/helpers/txn_workers.py <command> ...`.

Settings come from the environment like helpers/workers.py (TIDEKEEP_FAULT for a crash at a named
fault point, exit code 77).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import tidekeep as tk


def txn_events(count: int) -> list[tuple[bytes, str]]:
    """The events of a crash-test transaction: "t:i" on five routing keys."""
    return [(f"t:{i}".encode(), f"k{i % 5}") for i in range(count)]


def commit(args: argparse.Namespace) -> None:
    """Begin a transaction, stage its events, record its id, then commit (or --scale first)."""
    with tk.connect(create=True) as client:
        txn = client.stream(args.stream).transactional_writer(args.writer).begin()
        for payload, key in txn_events(args.events):
            txn.write(payload, key)
        txn.flush()
        Path(args.id_file).write_text(txn.id)
        if args.split_before_commit:
            client.stream(args.stream).split(0)
        result = txn.commit(timestamp=args.timestamp)
        print(f"committed {result.events} events", flush=True)


def commit_many(args: argparse.Namespace) -> None:
    """Commit --txns transactions of --per-txn events ("t<n>:<i>", seven keys), each staged in
    several chunks; split the first active segment before committing the middle one."""
    with tk.connect(create=True) as client:
        tw = client.stream(args.stream).transactional_writer(args.writer, batch_size=400)
        for n in range(args.txns):
            txn = tw.begin()
            for i in range(args.per_txn):
                txn.write(f"t{n}:{i}".encode(), f"k{i % 7}")
            if n == args.txns // 2:
                txn.flush()
                client.stream(args.stream).split(client.stream(args.stream).state().active_segments()[0].id)
            txn.commit(timestamp=n)
        print(f"committed {args.txns} transactions", flush=True)


def abort(args: argparse.Namespace) -> None:
    with tk.connect(create=True) as client:
        client.transactions.abort(args.txn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="txn_workers")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("commit")
    p.add_argument("--stream", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--events", type=int, default=40)
    p.add_argument("--timestamp", type=int, default=None)
    p.add_argument("--id-file", required=True)
    p.add_argument("--split-before-commit", action="store_true")
    p.set_defaults(run=commit)
    p = commands.add_parser("commit-many")
    p.add_argument("--stream", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--txns", type=int, default=10)
    p.add_argument("--per-txn", type=int, default=60)
    p.set_defaults(run=commit_many)
    p = commands.add_parser("abort")
    p.add_argument("--txn", required=True)
    p.set_defaults(run=abort)
    args = parser.parse_args(argv)
    args.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
