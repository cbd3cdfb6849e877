"""HTTP API under load, against a bare FastAPI endpoint served the same way in the same run.

    .venv/bin/python benchmarks/bench_api.py [--streams N] [--clients C] [--seconds T]
                                             [--rss-requests R] [--json FILE]

A workspace (SQLite metadata, local storage) with N streams (default 200) in scope `bench`, one of
them holding --events events over 4 segments, and a viewer token. Two server processes, one after
the other, with the same uvicorn settings (api/server.py: no access log, no server header):

  tidekeep api      `tidekeep api` itself (authentication on), every request with the viewer token
  bare              a FastAPI app with one route answering a JSON document of the same size as the
                    stream describe response (the baseline: what FastAPI and uvicorn cost alone)

Each route is driven by C concurrent clients (default 32, httpx async, one connection each) for
T seconds (default 30) after a short warm-up:

  describe          GET /api/v1/scopes/bench/streams/{stream}
  list              GET /api/v1/scopes/bench/streams (the first page, 100 streams)
  preview           GET /api/v1/scopes/bench/streams/{stream}/retention/preview (skipped, with a
                    message, when the server has no such route)
  bare              GET /doc of the bare app

Reported per route: requests, requests/s, p50 and p99 latency (ms), errors (non-2xx); the ratio of
describe's p99 to the bare endpoint's (goal: <= 3x); and the tidekeep server's resident memory
(VmRSS of /proc/<pid>/status) after it has answered R requests in all (default 100 000; describes
are sent until then). Clients and servers share the machine's cores: compare ratios from quiet
runs. Timing never fails anything. The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import tidekeep as tk
from tidekeep.store.tokens import TokenStore

P99_GOAL = 3.0  # describe's p99 at most this many times the bare endpoint's
PREVIEW_TEMPLATE = "/api/v1/scopes/{scope}/streams/{stream}/retention/preview"

# the bare app: one route answering a document of SIZE bytes, served as api/server.py serves the API
BARE = """
import sys
import uvicorn
from fastapi import FastAPI

port, size = int(sys.argv[1]), int(sys.argv[2])
document = {"name": "bench/s0000", "padding": ""}
document["padding"] = "x" * max(0, size - len('{"name":"bench/s0000","padding":""}'))
app = FastAPI()

@app.get("/doc")
def doc() -> dict:
    return document

@app.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}

uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                              server_header=False, timeout_graceful_shutdown=5)).run()
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_workspace(home: Path, streams: int, events: int) -> str:
    """The workspace; returns the viewer token's text."""
    with tk.connect(home=home, create=True) as client:
        client.create_stream("bench/s0000", tk.StreamConfig(segments=4, retention=tk.RetentionPolicy.by_size(10**9)))
        with client.stream("bench/s0000").writer("w") as writer:
            writer.write_many([b"e" * 100] * events, [f"k{i % 97}" for i in range(events)])
            writer.flush()
        for i in range(1, streams):
            client.create_stream(f"bench/s{i:04d}")
        _, token = TokenStore(client.workspace.db, client.workspace.audit).create("bench-viewer", "viewer")
    return token


def wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the server at {url} did not answer within 60 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no VmRSS for process {pid}")


async def drive(url: str, path: str, headers: dict[str, str], clients: int, seconds: float,
                requests: int | None = None) -> dict[str, Any]:
    """`clients` loops sending GET `path` until `seconds` have passed (or `requests` were sent)."""
    latencies: list[float] = []
    failures: list[Exception] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as http:
        async def one_client() -> None:
            nonlocal errors, sent
            while time.perf_counter() < deadline and (requests is None or sent < requests):
                sent += 1
                started = time.perf_counter()
                try:
                    response = await http.get(path)
                except httpx.TransportError as exc:  # counted, and told once: the run goes on
                    if not failures:
                        log(f"  {path}: {type(exc).__name__} {exc}")
                    failures.append(exc)
                    continue
                latencies.append(time.perf_counter() - started)
                if not 200 <= response.status_code < 300:
                    errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"requests": len(ordered), "seconds": round(elapsed, 3),
            "requests_per_s": round(len(ordered) / elapsed, 1) if elapsed else 0.0,
            "p50_ms": round(statistics.median(ordered) * 1000, 2) if ordered else None,
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2) if ordered else None,
            "errors": errors + len(failures)}


def measure(url: str, path: str, headers: dict[str, str], options: argparse.Namespace) -> dict[str, Any]:
    log(f"  {path}: warm-up {options.warmup} s, then {options.clients} clients for {options.seconds} s")
    warm = asyncio.run(drive(url, path, headers, options.clients, options.warmup))
    result = asyncio.run(drive(url, path, headers, options.clients, options.seconds))
    result["warmup_requests"] = warm["requests"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=200, help="streams in the workspace (default 200)")
    parser.add_argument("--events", type=int, default=10_000, help="events in the described stream")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds per route (default 30)")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per route (default 2)")
    parser.add_argument("--rss-requests", type=int, default=100_000,
                        help="read the server's RSS once it has answered this many requests (default 100000)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    options = parser.parse_args()

    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-api-") as tmp:
        home = Path(tmp) / "home"
        log(f"workspace: {options.streams} streams, {options.events} events in bench/s0000")
        token = make_workspace(home, options.streams, options.events)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
        env["TIDEKEEP_HOME"] = str(home)
        headers = {"Authorization": f"Bearer {token}"}

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server_log = Path(tmp) / "server.log"
        with server_log.open("wb") as sink:
            server = subprocess.Popen([sys.executable, "-m", "tidekeep.cli", "api", "--listen", f"127.0.0.1:{port}"],
                                      env=env, stdout=sink, stderr=sink)
        try:
            wait_until_up(url, server)
            describe_path = "/api/v1/scopes/bench/streams/s0000"
            described = httpx.get(url + describe_path, headers=headers, timeout=30)
            described.raise_for_status()
            document_size = len(described.content)
            paths = {"describe": describe_path, "list": "/api/v1/scopes/bench/streams",
                     "preview": "/api/v1/scopes/bench/streams/s0000/retention/preview"}
            if PREVIEW_TEMPLATE not in httpx.get(f"{url}/openapi.json", timeout=30).json()["paths"]:
                skipped["preview"] = "the server has no retention preview route (GET " + PREVIEW_TEMPLATE + ")"
                log(f"  skipping preview: {skipped['preview']}")
                del paths["preview"]
            log(f"tidekeep api (pid {server.pid}), describe answers {document_size} bytes")
            rss_start = rss_kib(server.pid)
            for name, path in paths.items():
                results[name] = measure(url, path, headers, options)
            answered = sum(r["requests"] + r["warmup_requests"] for r in results.values()) + 2
            remaining = max(0, options.rss_requests - answered)
            rss_errors = 0
            if remaining:
                log(f"  {remaining} more describes for the RSS reading after {options.rss_requests} requests")
                rss_errors = asyncio.run(drive(url, describe_path, headers, options.clients, float("inf"),
                                               remaining))["errors"]
            if rss_errors or any(r["errors"] for r in results.values()):
                log(f"  errors: the server's log ends with\n{server_log.read_text()[-2000:] or '(nothing)'}")
            if server.poll() is not None:
                raise SystemExit(f"the server exited with {server.returncode}:\n{server_log.read_text()[-3000:]}")
            rss_after = rss_kib(server.pid)
        finally:
            stop(server)

        bare_port = free_port()
        bare_url = f"http://127.0.0.1:{bare_port}"
        bare = subprocess.Popen([sys.executable, "-c", BARE, str(bare_port), str(document_size)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until_up(bare_url, bare)
            bare_size = len(httpx.get(f"{bare_url}/doc", timeout=30).content)
            log(f"bare FastAPI (pid {bare.pid}), /doc answers {bare_size} bytes")
            results["bare"] = measure(bare_url, "/doc", {}, options)
        finally:
            stop(bare)

    ratio = (results["describe"]["p99_ms"] / results["bare"]["p99_ms"]
             if results["describe"]["p99_ms"] and results["bare"]["p99_ms"] else None)
    print(f"{options.clients} clients, {options.seconds} s per route, {options.streams} streams, "
          f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'route':<10} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for name, row in results.items():
        print(f"{name:<10} {row['requests']:>9} {row['requests_per_s']:>8.1f} {row['p50_ms'] or 0:>8.2f} "
              f"{row['p99_ms'] or 0:>8.2f} {row['errors']:>7}")
    for name, why in skipped.items():
        print(f"{name:<10} skipped: {why}")
    print(f"describe p99 / bare p99: {'-' if ratio is None else f'{ratio:.2f}x'} (goal <= {P99_GOAL:.0f}x)")
    print(f"server RSS: {rss_start / 1024:.1f} MiB at start, {rss_after / 1024:.1f} MiB after "
          f"{max(options.rss_requests, answered)} requests ({rss_errors} errors among the describes sent for it)")
    if options.json is not None:
        options.json.write_text(json.dumps({
            "clients": options.clients, "seconds": options.seconds, "streams": options.streams,
            "describe_bytes": document_size, "bare_bytes": bare_size, "results": results, "skipped": skipped,
            "describe_p99_ratio": None if ratio is None else round(ratio, 3), "p99_goal": P99_GOAL,
            "rss_kib_start": rss_start, "rss_kib_after": rss_after,
            "rss_after_requests": max(options.rss_requests, answered),
            "rss_phase_errors": rss_errors}, indent=2) + "\n")


if __name__ == "__main__":
    main()
