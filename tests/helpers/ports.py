"""Loopback ports for the servers tests start (Spark Connect, a standalone master and its web UI).

A port probed free and then handed to a server that binds it seconds later can be taken in
between. Ports the kernel hands out itself — for every outgoing connection (the S3 clients make
many) and every bind to port 0 (each Spark driver's ports) — come from its ephemeral range, so a
port chosen below that range can only be taken by another test's explicit choice; the servers'
helpers retry with a new port when even that happens.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default range
LOWEST = 10000  # below: well-known and registered services


def ephemeral_range(source: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    try:
        low, high = (int(part) for part in source.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def candidate_ports(ephemeral: tuple[int, int]) -> range:
    """The ports a test server may use: below the ephemeral range when there is room there,
    else above it."""
    low, high = ephemeral
    if low - LOWEST >= 1000:
        return range(LOWEST, low)
    return range(max(high + 1, LOWEST), 65536)


def unused_port(host: str = "127.0.0.1", chooser: random.Random | None = None) -> int:
    """A port on `host` that nothing listens on or is bound to now, outside the kernel's
    ephemeral range."""
    candidates = candidate_ports(ephemeral_range())
    pick = chooser or random.SystemRandom()
    for _ in range(200):
        port = pick.choice(candidates)
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on {host} in {candidates.start}-{candidates.stop - 1}")
