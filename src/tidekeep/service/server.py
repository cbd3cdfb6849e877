"""The `tidekeep serve` process: logging, signal handling, the lease heartbeat and the pass loop.

SIGTERM or SIGINT sets a stop flag: the stream in hand is finished, no new one is started, every
lease this process holds is released, and the process exits 0. A heartbeat thread renews the
leases every third of the TTL while the main thread works, so a long retention cycle does not
lose its lease; a process that dies (SIGKILL) stops renewing and its leases run out after the TTL.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..printable import PrintableFormatter
from ..redaction import RedactingFilter
from ..store.house import Workspace, verify_identity
from ..streams.retention_reasons import describe_decision
from .assembly import Families, ServeOptions, assemble, families_of
from .scheduler import RetentionService

log = logging.getLogger("tidekeep.service")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        return json.dumps(entry, default=str)


def configure_service_logging(level: str, json_logs: bool) -> None:
    """One line per event on stderr; the service logs at the configured level (INFO by default)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else PrintableFormatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # no password in any log line, at any level
    logger = logging.getLogger("tidekeep")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.getLevelName(level))
    logger.propagate = False


def build_service(workspace: Workspace, options: ServeOptions, owner: str | None = None,
                  families: Families | None = None) -> RetentionService:
    """The service with the real work of `families` (default: the family facades over `workspace`,
    service/assembly.py), its decisions logged by `describe_decision`."""
    return assemble(workspace, families or families_of(workspace), options, owner, describe_decision)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def handler(signum: int, _frame: Any) -> None:
        log.info("received %s: finishing the current stream, then shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def heartbeat(service: RetentionService, done: threading.Event, interval_s: float) -> None:
    while not done.wait(interval_s):
        try:
            service.renew()
        except Exception as exc:  # a store hiccup: the next beat tries again, well within the TTL
            log.warning("lease renewal failed: %s: %s", type(exc).__name__, exc)


def _watermark_loop(service: RetentionService, done: threading.Event, interval_s: float) -> None:
    while not done.wait(interval_s):
        try:
            service.run_watermarks()
        except Exception as exc:  # the next interval tries again
            log.warning("watermarks failed: %s: %s", type(exc).__name__, exc)


def serve(workspace: Workspace, options: ServeOptions, owner: str | None = None,
          families: Families | None = None) -> int:
    """Run the service until stopped (or one pass with `once`); returns the exit code."""
    workspace.storage.require_deletable()  # the service deletes files: only in a workspace proven to be itself
    service = build_service(workspace, options, owner, families)
    beat_s = options.lease_ttl_ms / 3000
    # passes come often enough to notice takeovers and new streams well within one TTL
    pass_interval_s = max(0.05, min(options.lease_ttl_ms / 3, options.frequency_ms) / 1000)
    if options.watermark_every_ms is not None:
        # and new streams with marks within a few watermark intervals
        pass_interval_s = max(0.05, min(pass_interval_s, 3 * options.watermark_every_ms / 1000))
    log.info("serve started: owner=%s frequency=%dms lease_ttl=%dms sweep_every=%dms%s", service.owner,
             options.frequency_ms, options.lease_ttl_ms, options.sweep_every_ms, " (once)" if options.once else "")
    beat_done = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(service, beat_done, beat_s), name="lease-heartbeat", daemon=True)
    marks = None
    if options.watermark_every_ms is not None and not options.once:
        marks = threading.Thread(target=_watermark_loop, args=(service, beat_done, options.watermark_every_ms / 1000),
                                 name="watermarks", daemon=True)
    with _stop_on_signals(service.stop):
        beat.start()
        if marks is not None:
            marks.start()
        try:
            while not service.stop.is_set():
                try:
                    # the storage root may have been remounted or repointed since the last pass
                    verify_identity(workspace.db, workspace.storage)
                    workspace.storage.require_deletable()
                    service.run_pass()
                except Exception as exc:  # e.g. the store is briefly unreachable: log, wait, go on
                    if options.once:
                        raise
                    log.warning("pass failed: %s: %s", type(exc).__name__, exc)
                if options.once:
                    break
                service.stop.wait(pass_interval_s)
        finally:
            beat_done.set()
            beat.join()
            if marks is not None:
                marks.join()
            released = service.release_all()
            log.info("serve stopped: owner=%s released %d leases", service.owner, len(released))
    return 0
