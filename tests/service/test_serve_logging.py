"""`tidekeep serve` logs each truncation once: one INFO line per truncation, over many scheduler ticks
of a service on the injectable clock (no wall-clock waits)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.service.server import ServeOptions, build_service

SECOND = 1_000
HOUR = 3_600_000


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logs() -> Iterator[Collect]:
    # on the "tidekeep" logger itself: an in-process CLI test may have stopped it propagating to root
    logger = logging.getLogger("tidekeep")
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def write_batch(client: tk.Client, stream: str, batch: int) -> None:
    with client.stream(stream).writer(f"w{batch}") as writer:
        writer.write_many([f"{batch}:{i}".encode() * 4 for i in range(20)], [f"k{i % 3}" for i in range(20)])


def test_serve_logs_each_truncation_once_over_many_ticks(tmp_path: Path, metadata_url: str, logs: Collect) -> None:
    clock = tk.ManualClock(1_700_000_000_000)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=clock, settings={"writer.linger": 0, "retention.frequency": "1s"}, create=True)
    try:
        stream = "s/due"
        client.create_stream(stream, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size("1TB")))
        for batch in range(2):  # two recorded cuts, an hour apart
            write_batch(client, stream, batch)
            client.stream(stream).retention.run()
            clock.advance(HOUR)
        first, second = client.stream(stream).retention.records()
        client.stream(stream).update(tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(
            (second.recording_size - first.recording_size) * 3 // 2)))
        write_batch(client, stream, 2)  # now the first record keeps more than min: one truncation is due
        service = build_service(client.workspace, ServeOptions(frequency_ms=SECOND, lease_ttl_ms=30 * SECOND,
                                                     sweep_every_ms=HOUR, catalog=False, archives=False,
                                                     watermark_every_ms=None), owner="p1")
        logs.records.clear()
        ran = 0
        for _ in range(6):  # several ticks, each after the stream is due again
            ran += len(service.run_pass().ran)
            clock.advance(2 * SECOND)
        assert ran == 6  # the stream really was looked at every tick
        assert len(client.audit(stream)) == 1  # and truncated exactly once
        about = [r.getMessage() for r in logs.records if r.levelno >= logging.INFO and "truncat" in r.getMessage()
                 and "nothing to truncate" not in r.getMessage()]
        assert len(about) == 1, about
        assert about[0].startswith(f"truncated {stream} at {{") and "freed_bytes=" in about[0]
        kept = [r.getMessage() for r in logs.records if r.getMessage().startswith(f"kept {stream}")]
        assert len(kept) == 5  # the later ticks say why nothing was truncated, not "truncated" again
    finally:
        client.close()
