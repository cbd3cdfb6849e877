"""Reader-group worker processes: `python tests/helpers/rg_workers.py read ...`.

Settings come from the environment (see helpers.procs.worker_env). A reader joins the group, reads
until the stop file exists and a read comes back empty, then closes (or is SIGKILLed by the test).
While its pause file exists it does not read at all (so it passes no checkpoint and its group's
acknowledgement stays where it is) and `<pause file>.paused` exists; it removes that on resuming.
Every event it returns is one line of its output file, written and flushed before the next read:
`[segment, offset, routing_key, payload, monotonic_ns]`; a checkpoint marker is
`["checkpoint", name, positions]`, with the positions the reader held when it passed it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import tidekeep as tk

RG_WORKERS = Path(__file__)


def read(args: argparse.Namespace) -> None:
    stop_file = Path(args.stop_file)
    with tk.connect(create=True) as client, open(args.out, "w", encoding="utf-8") as out:
        group = client.reader_group(args.group)
        reader = group.reader(args.reader, sync_every_events=args.sync_every)
        Path(args.out + ".joined").touch()
        pause_file = Path(args.pause_file) if args.pause_file else None
        while True:
            if pause_file is not None and pause_file.exists():
                paused = Path(f"{pause_file}.paused")
                while pause_file.exists():
                    paused.touch()
                    time.sleep(0.01)
                paused.unlink(missing_ok=True)
            event = reader.read_next_event(args.timeout_ms)
            if event.is_event:
                assert event.position is not None
                out.write(json.dumps([event.position.segment, event.position.offset, event.routing_key,
                                      event.payload.decode() if event.payload else "", time.monotonic_ns()]) + "\n")
            elif event.is_checkpoint:
                positions = {s: {str(k): v for k, v in p.items()} for s, p in reader.positions().items()}
                out.write(json.dumps(["checkpoint", event.checkpoint_name, positions]) + "\n")
            elif stop_file.exists():
                break
            out.flush()
            if args.pace:
                time.sleep(args.pace)
        reader.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rg_workers")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("read")
    p.add_argument("--group", required=True)
    p.add_argument("--reader", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--timeout-ms", type=int, default=100)
    p.add_argument("--sync-every", type=int, default=50)
    p.add_argument("--pace", type=float, default=0.0, help="seconds to sleep after each read")
    p.add_argument("--pause-file", default=None, help="no reads while this file exists")
    p.set_defaults(run=read)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
