"""A deterministic corpus of realistic logs for the archives benchmark.

    .venv/bin/python benchmarks/gen_logs.py OUT_DIR [--size 1GB] [--seed 7] [--days 7] [--start 2024-10-07]
                                            [--style mixed|hdfs]

Writes OUT_DIR/logs/<service>/... (the files to ingest) and OUT_DIR/manifest.json (seed, style,
span, every file with its raw and stored size, line and message counts). Same seed, size and style
→ byte-identical files (gzip headers carry no name or mtime). Two styles:

mixed (the default): six services in separate files, one file per UTC day, each in a timestamp
form the ingest recognises at the start of a line:

  gateway   access log, ISO-8601 UTC            2024-10-07T13:55:36.123Z gw-2 203.0.113.7 - ... "GET /api/.." 200 ..
  payments  Java / log4j, multi-line traces    2024-10-07 13:55:36,123 ERROR [http-nio-8443-exec-7] c.e.p.X - ...
  auth      syslog (no year, no zone)          Oct  7 13:55:36 auth-01 sshd[2231]: Accepted publickey for ...
  orders    epoch milliseconds + JSON          1728309336123 {"level":"info","event":"order_created",...}
  worker    Python logging, tracebacks         2024-10-07 13:55:36,123 [INFO] worker.tasks: Task resize[..] ...
  edge      ISO-8601 with a +02:00 offset      2024-10-07T15:55:36.123+02:00 level=info msg="cache miss" ...

plus one small file without any timestamp (backup/rsync-nightly.out, ~0.2 % of the bytes). The
gateway's and auth's rotated days are gzip-compressed (level 6), as logrotate leaves them; the
last day of every service is plain.

hdfs: one Hadoop 2.x/3.x cluster as its default log4j layout `%d{ISO8601} %p %c: %m%n` writes it,
one timestamp form (2024-10-07 13:55:36,123 INFO org.apache.hadoop.hdfs.StateChange: BLOCK* allocate ...):

  namenode          35 %  audit lines (the most frequent), BLOCK* allocate / addStoredBlock, completeFile,
                          FSEditLog, invalidations, a few WARNs (a GC pause spans two lines)
  datanode-01..04   65 %  block writes (Receiving, clienttrace HDFS_WRITE, PacketResponder, Received),
                          reads (clienttrace HDFS_READ), deletions, block reports, VolumeScanner, slow
                          BlockReceiver WARNs, and ~0.3 % WARN/ERROR with a Java stack trace

Files are named as log4j's DailyRollingFileAppender names them (namenode/hadoop-hdfs-namenode-nn1.log,
rotated days ...nn1.log.2024-10-07); the datanodes' rotated days are gzip-compressed (level 6), the
namenode's plain. Block ids rise from HDFS's first (1073741825) as the namenode allocates them, one
generation stamp per block from 1001; the datanodes' lines name the blocks allocated around their
time, in one block pool. No file without timestamps.

Variable parts (users, IPs, ids, paths, durations, sizes) come from a seeded numpy generator over
precomputed vocabularies with Zipf-like popularity, plus random request/trace ids, so the data
compresses like real logs (mixed: zstd -3 keeps roughly a tenth; hdfs, more repetitive, zlib -6
about 9x), neither trivially nor like noise. Timestamps rise through the span with a day/night
traffic curve; within a file they never go back. All text is ASCII, so characters are bytes.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

DAY_MS = 86_400_000
DEFAULT_START = "2024-10-07"
BLOCK_LINES = 20_000
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
NO_TIMESTAMP_SHARE = 0.002
SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str) -> int:
    """ "1GB" (decimal), "50MiB" (binary) or a number of bytes."""
    value = text.strip().upper()
    for unit in sorted(SIZE_UNITS, key=len, reverse=True):
        if value.endswith(unit) and value[: -len(unit)].strip():
            return int(float(value[: -len(unit)]) * SIZE_UNITS[unit])
    return int(value)


# ---- vocabularies ------------------------------------------------------------------------------

class Vocab:
    """Words drawn with Zipf-like popularity (a few very common, a long tail)."""

    def __init__(self, items: list[str], skew: float = 1.0) -> None:
        self.items = np.array(items, dtype=object)
        weights = 1.0 / np.arange(1, len(items) + 1) ** skew
        self.cdf = np.cumsum(weights) / weights.sum()

    def draw(self, rng: np.random.Generator, n: int) -> list[str]:
        index = np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"), len(self.items) - 1)
        return self.items[index].tolist()


def weighted(rng: np.random.Generator, n: int, choices: list, weights: list[float]) -> list:
    p = np.asarray(weights, dtype=float)
    index = rng.choice(len(choices), size=n, p=p / p.sum())
    return [choices[i] for i in index.tolist()]


def hex_ids(rng: np.random.Generator, n: int, digits: int) -> list[str]:
    values = rng.integers(0, 2 ** (4 * digits), size=n, dtype=np.uint64)
    return [f"{v:0{digits}x}" for v in values.tolist()]


def recent_ids(rng: np.random.Generator, n: int, first: int, per_line: float, lag: int | np.ndarray) -> list[int]:
    """Sequential ids as a service hands them out, each line naming one of the recent ones (the
    same order or payment shows up in several lines, as in real logs)."""
    return (first + (np.arange(n) * per_line).astype(np.int64) - rng.integers(0, lag, n)).tolist()


def lognormal_ints(rng: np.random.Generator, n: int, median: float, sigma: float) -> list[int]:
    return np.maximum(1, rng.lognormal(np.log(median), sigma, n)).astype(np.int64).tolist()


FIRST = ("alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil trent "
         "victor walter xavier yusuf zoe amir bianca chen dmitri elena fatima goran hana igor jamal kenji "
         "lena marco nora oscar priya quinn rosa sven tara umar vera wei ximena yara zane")
LAST = ("smith jones brown garcia miller davis wilson moore taylor anderson thomas jackson white harris "
        "martin thompson martinez robinson clark lewis lee walker hall allen young king wright scott green "
        "baker adams nelson hill campbell mitchell roberts carter phillips evans turner torres parker")
USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 "
    "Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0 Mobile Safari/537.36",
    "okhttp/4.12.0", "python-requests/2.32.3", "curl/8.5.0", "Go-http-client/2.0", "kube-probe/1.30",
    "Prometheus/2.54.1", "Apache-HttpClient/5.3.1 (Java/17.0.12)", "axios/1.7.7", "PostmanRuntime/7.42.0",
]


@dataclass
class Vocabularies:
    users: Vocab
    client_ips: Vocab
    internal_ips: Vocab
    agents: Vocab
    skus: Vocab
    assets: Vocab
    products: Vocab

    @classmethod
    def build(cls, rng: np.random.Generator) -> Vocabularies:
        people = [f"{first}.{last}" for first in FIRST.split() for last in LAST.split()]
        rng.shuffle(people)
        users = people[:3000] + [f"svc-{s}" for s in ("billing", "deploy", "backup", "monitor", "etl")]
        rng.shuffle(users)
        ips = rng.integers(1, 255, size=(20_000, 4)).tolist()
        client_ips = [f"{a}.{b}.{c}.{d}" for a, b, c, d in ips]
        internal = [f"10.{a % 16}.{b}.{c}" for a, b, c, _ in rng.integers(0, 255, size=(400, 4)).tolist()]
        skus = [f"SKU-{rng.integers(10000, 99999)}-{c}" for c in "ABCDEFGH" for _ in range(250)]
        assets = [f"/static/{kind}/{name}.{h}.{ext}" for kind, ext in (("js", "js"), ("css", "css"), ("img", "webp"))
                  for name in ("app", "vendor", "checkout", "search", "home", "product", "cart", "account",
                               "hero", "logo", "banner", "icons")
                  for h in hex_ids(rng, 4, 8)]
        rng.shuffle(assets)
        products = [str(p) for p in rng.choice(np.arange(100_000, 1_000_000), size=30_000, replace=False).tolist()]
        return cls(Vocab(users, 0.9), Vocab(client_ips[:8000], 0.9), Vocab(internal, 0.8), Vocab(USER_AGENTS, 1.3),
                   Vocab(skus, 1.1), Vocab(assets, 1.2), Vocab(products, 0.9))


# ---- timestamp forms ---------------------------------------------------------------------------

def iso_ms(ts: np.ndarray) -> list[str]:
    """'2024-10-07T13:55:36.123' for each ms value (vectorised)."""
    return np.datetime_as_string(ts.astype("datetime64[ms]"), unit="ms").tolist()


def stamp_iso_utc(ts: np.ndarray) -> list[str]:
    return [s + "Z" for s in iso_ms(ts)]


def stamp_iso_plus2(ts: np.ndarray) -> list[str]:
    return [s + "+02:00" for s in iso_ms(ts + 2 * 3_600_000)]


def stamp_log4j(ts: np.ndarray) -> list[str]:
    return [f"{s[:10]} {s[11:19]},{s[20:23]}" for s in iso_ms(ts)]


def stamp_syslog(ts: np.ndarray) -> list[str]:
    return [f"{MONTHS[int(s[5:7]) - 1]} {int(s[8:10]):>2} {s[11:19]}" for s in iso_ms(ts)]


def stamp_epoch_ms(ts: np.ndarray) -> list[str]:
    return [str(v) for v in ts.tolist()]


# ---- services: bodies without the timestamp; a body may span several lines ----------------------

GATEWAY_ROUTES = [
    ("GET", "/api/v1/products/{id}", 30), ("GET", "/api/v1/products?category={cat}&page={page}", 14),
    ("GET", "/api/v1/orders/{id}", 10), ("POST", "/api/v1/orders", 6), ("GET", "/api/v1/users/{id}/cart", 9),
    ("PUT", "/api/v1/users/{id}/cart", 5), ("POST", "/api/v1/payments/{id}/authorize", 3),
    ("POST", "/api/v1/auth/token", 4), ("GET", "/healthz", 8), ("GET", "{asset}", 25),
    ("GET", "/api/v1/search?q={q}", 7), ("DELETE", "/api/v1/users/{id}/cart/items/{id2}", 1),
]
CATEGORIES = ["shoes", "books", "garden", "toys", "kitchen", "electronics", "music", "sports", "office"]
SEARCH_TERMS = ["red+shoes", "usb-c+cable", "coffee", "desk+lamp", "running", "lego", "headphones", "notebook",
                "gift+card", "tent", "yoga+mat", "charger"]
STATUSES = [200, 201, 204, 301, 304, 400, 401, 403, 404, 429, 500, 502, 503]
STATUS_W = [78, 3, 2, 0.5, 6, 2, 1.5, 0.5, 4, 0.8, 0.4, 0.2, 0.1]


def gateway_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    routes = weighted(rng, n, GATEWAY_ROUTES, [w for *_, w in GATEWAY_ROUTES])
    hosts = rng.integers(1, 5, n).tolist()
    ips = v.client_ips.draw(rng, n)
    anon = (rng.random(n) < 0.35).tolist()
    users = v.users.draw(rng, n)
    rids = hex_ids(rng, n, 16)
    ids = v.products.draw(rng, n)
    ids2 = rng.integers(1, 500, n).tolist()
    cats = weighted(rng, n, CATEGORIES, [1] * len(CATEGORIES))
    pages = rng.integers(1, 12, n).tolist()
    terms = weighted(rng, n, SEARCH_TERMS, [1] * len(SEARCH_TERMS))
    assets = v.assets.draw(rng, n)
    statuses = weighted(rng, n, STATUSES, STATUS_W)
    sizes = lognormal_ints(rng, n, 2400, 1.3)
    rts = (rng.lognormal(np.log(0.03), 1.0, n)).tolist()
    agents = v.agents.draw(rng, n)
    out = []
    for i in range(n):
        method, template, _ = routes[i]
        path = template.format(id=ids[i], id2=ids2[i], cat=cats[i], page=pages[i], q=terms[i], asset=assets[i])
        user = "-" if anon[i] else users[i]
        out.append(f'gw-{hosts[i]} {ips[i]} - {user} [{rids[i]}] "{method} {path} HTTP/1.1" {statuses[i]} '
                   f'{sizes[i]} {rts[i]:.3f} "{agents[i]}"')
    return out


JAVA_FRAMES = [
    "com.example.payments.PaymentService.authorize(PaymentService.java:{n})",
    "com.example.payments.PaymentService.capture(PaymentService.java:{n})",
    "com.example.payments.ledger.LedgerService.post(LedgerService.java:{n})",
    "com.example.payments.ledger.LedgerRepository.save(LedgerRepository.java:{n})",
    "com.example.payments.gateway.CardGatewayClient.send(CardGatewayClient.java:{n})",
    "com.example.payments.api.PaymentController.authorize(PaymentController.java:{n})",
    "org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:{n})",
    "org.springframework.transaction.support.TransactionTemplate.execute(TransactionTemplate.java:{n})",
    "org.springframework.aop.framework.CglibAopProxy$DynamicAdvisedInterceptor.intercept(CglibAopProxy.java:{n})",
    "com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:{n})",
    "com.zaxxer.hikari.HikariDataSource.getConnection(HikariDataSource.java:{n})",
    "org.hibernate.engine.jdbc.internal.ResultSetReturnImpl.extract(ResultSetReturnImpl.java:{n})",
    "java.base/java.net.SocketInputStream.read(SocketInputStream.java:{n})",
    "java.base/java.util.ArrayList$Itr.checkForComodification(ArrayList.java:{n})",
    "java.base/java.util.ArrayList$Itr.next(ArrayList.java:{n})",
    "org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:{n})",
    "org.apache.tomcat.util.net.NioEndpoint$SocketProcessor.doRun(NioEndpoint.java:{n})",
    "java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:{n})",
    "java.base/java.lang.Thread.run(Thread.java:{n})",
]
JAVA_ERRORS = [
    ("Failed to obtain JDBC connection for payment {id}",
     "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, request timed out after "
     "30000ms.", 40),
    ("Card gateway call failed for payment {id}", "java.net.SocketTimeoutException: Read timed out", 25),
    ("Rejected capture of payment {id}", "java.lang.IllegalStateException: payment {id} is not in state AUTHORIZED",
     20),
    ("Unexpected error while authorizing payment {id}", "java.lang.NullPointerException: Cannot invoke "
     "\"com.example.payments.model.Card.getToken()\" because \"card\" is null", 13),
    ("Failed to post ledger entry for payment {id}", "java.util.ConcurrentModificationException: null", 2),
]
JAVA_INFO = [
    ("INFO ", "c.e.payments.PaymentService", "Payment {id} authorized for user={user} amount={amount} {cur} "
     "card=****{last4} in {ms} ms", 30),
    ("INFO ", "c.e.payments.PaymentService", "Payment {id} captured amount={amount} {cur} in {ms} ms", 22),
    ("INFO ", "c.e.payments.ledger.LedgerService", "Posted ledger entry {id2} for payment {id} balance={amount}", 15),
    ("DEBUG", "c.e.payments.gateway.CardGatewayClient", "POST https://cards.example.net/v2/auth status=200 "
     "took={ms}ms attempt=1", 12),
    ("INFO ", "c.e.payments.api.PaymentController", "GET /payments/{id} user={user} 200 {ms}ms", 10),
    ("WARN ", "c.e.payments.gateway.CardGatewayClient", "Retrying card gateway call for payment {id} after {ms} ms "
     "(attempt 2 of 3)", 4),
    ("WARN ", "com.zaxxer.hikari.pool.HikariPool", "HikariPool-1 - Thread starvation or clock leap detected "
     "(housekeeper delta={ms}ms).", 1),
    ("INFO ", "c.e.payments.RefundService", "Refund {id2} issued for payment {id} amount={amount} {cur} "
     "reason=customer_request", 5),
]
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "SEK"]


def java_trace(rng: np.random.Generator, exception: str, pid: int) -> str:
    frames = rng.choice(len(JAVA_FRAMES), size=int(rng.integers(6, 22)), replace=True).tolist()
    lines = rng.integers(30, 900, len(frames)).tolist()
    text = [exception.format(id=pid)]
    text += [f"\tat {JAVA_FRAMES[f].format(n=n)}" for f, n in zip(frames, lines, strict=True)]
    if rng.random() < 0.3:
        text.append("Caused by: java.io.EOFException: Unexpected end of stream")
        text.append(f"\tat {JAVA_FRAMES[12].format(n=int(rng.integers(30, 900)))}")
        text.append(f"\t... {int(rng.integers(5, 40))} more")
    return "\n".join(text)


def payments_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    templates = weighted(rng, n, JAVA_INFO, [w for *_, w in JAVA_INFO])
    is_error = (rng.random(n) < 0.008).tolist()
    errors = weighted(rng, n, JAVA_ERRORS, [w for *_, w in JAVA_ERRORS])
    threads = rng.integers(1, 64, n).tolist()
    ids = recent_ids(rng, n, 31_000_000 + line0 // 2, 0.5, 400)
    ids2 = recent_ids(rng, n, 4_100_000 + line0 // 5, 0.2, 50)
    users = v.users.draw(rng, n)
    amounts = (rng.lognormal(np.log(40), 1.0, n)).tolist()
    curs = weighted(rng, n, CURRENCIES, [50, 30, 10, 5, 5])
    last4 = rng.integers(0, 10_000, n).tolist()
    ms = lognormal_ints(rng, n, 45, 0.9)
    out = []
    for i in range(n):
        thread = f"http-nio-8443-exec-{threads[i]}"
        if is_error[i]:
            head, exception, _ = errors[i]
            out.append(f"ERROR [{thread}] c.e.payments.PaymentService - {head.format(id=ids[i])}\n"
                       + java_trace(rng, exception, ids[i]))
            continue
        level, logger, template, _ = templates[i]
        out.append(f"{level} [{thread}] {logger} - " + template.format(
            id=ids[i], id2=ids2[i], user=users[i], amount=f"{amounts[i]:.2f}", cur=curs[i], last4=f"{last4[i]:04d}",
            ms=ms[i]))
    return out


AUTH_EVENTS = [
    ("sshd", "Accepted publickey for {user} from {ip} port {port} ssh2: ED25519 SHA256:{key}", 20),
    ("sshd", "pam_unix(sshd:session): session opened for user {user}(uid={uid}) by (uid=0)", 20),
    ("sshd", "pam_unix(sshd:session): session closed for user {user}", 18),
    ("sshd", "Failed password for invalid user {bad} from {ext} port {port} ssh2", 9),
    ("sshd", "Invalid user {bad} from {ext} port {port}", 9),
    ("sshd", "Connection closed by authenticating user {user} {ip} port {port} [preauth]", 4),
    ("sudo", "{user} : TTY=pts/{tty} ; PWD=/home/{user} ; USER=root ; COMMAND=/usr/bin/systemctl restart {unit}", 6),
    ("CRON", "pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)", 8),
    ("systemd-logind", "New session {sess} of user {user}.", 6),
]
BAD_USERS = ["admin", "root", "test", "oracle", "ubuntu", "postgres", "git", "guest", "user", "ftpuser", "pi"]
UNITS = ["nginx", "payments", "orders", "worker", "postgresql", "redis-server"]


def auth_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    events = weighted(rng, n, AUTH_EVENTS, [w for *_, w in AUTH_EVENTS])
    hosts = rng.integers(1, 9, n).tolist()
    pids = rng.integers(1000, 65_000, n).tolist()
    users = v.users.draw(rng, n)
    ips = v.internal_ips.draw(rng, n)
    exts = v.client_ips.draw(rng, n)
    ports = rng.integers(32_768, 61_000, n).tolist()
    keys = hex_ids(rng, n, 12)
    bad = weighted(rng, n, BAD_USERS, [1] * len(BAD_USERS))
    uids = rng.integers(1000, 4000, n).tolist()
    ttys = rng.integers(0, 6, n).tolist()
    units = weighted(rng, n, UNITS, [1] * len(UNITS))
    sess = rng.integers(1, 90_000, n).tolist()
    out = []
    for i in range(n):
        prog, template, _ = events[i]
        text = template.format(user=users[i], ip=ips[i], ext=exts[i], port=ports[i], key=keys[i], bad=bad[i],
                               uid=uids[i], tty=ttys[i], unit=units[i], sess=sess[i])
        out.append(f"auth-{hosts[i]:02d} {prog}[{pids[i]}]: {text}")
    return out


ORDER_EVENTS = [("info", "order_created", 30), ("info", "order_paid", 25), ("info", "order_shipped", 15),
                ("info", "inventory_reserved", 20), ("warn", "inventory_low", 3), ("error", "payment_declined", 2),
                ("info", "order_cancelled", 3), ("debug", "cache_refresh", 2)]


def orders_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    events = weighted(rng, n, ORDER_EVENTS, [w for *_, w in ORDER_EVENTS])
    oids = recent_ids(rng, n, 2_000_000 + line0 // 3, 1 / 3, 300)
    users = v.users.draw(rng, n)
    skus = v.skus.draw(rng, n)
    items = rng.integers(1, 9, n).tolist()
    totals = lognormal_ints(rng, n, 4500, 1.0)
    curs = weighted(rng, n, CURRENCIES, [50, 30, 10, 5, 5])
    lat = lognormal_ints(rng, n, 18, 1.1)
    traces = hex_ids(rng, n, 16)
    pods = rng.integers(0, 6, n).tolist()
    out = []
    for i in range(n):
        level, event, _ = events[i]
        out.append(f'{{"level":"{level}","service":"orders","pod":"orders-7d9f8c-{pods[i]}","event":"{event}",'
                   f'"order_id":"ord-{oids[i]}","user":"{users[i]}","sku":"{skus[i]}","items":{items[i]},'
                   f'"total_cents":{totals[i]},"currency":"{curs[i]}","latency_ms":{lat[i]},"trace_id":"{traces[i]}"}}')
    return out


WORKER_TASKS = ["resize_image", "send_email", "generate_invoice", "sync_inventory", "rebuild_search_index",
                "export_report", "charge_subscription", "purge_sessions"]
PY_FRAMES = [
    ("/srv/worker/venv/lib/python3.11/site-packages/celery/app/trace.py", "trace_task",
     "R = retval = fun(*args, **kwargs)"),
    ('/srv/worker/app/tasks.py', "{task}", "result = handler.run(payload)"),
    ('/srv/worker/app/handlers/media.py', "run", "img = Image.open(io.BytesIO(blob))"),
    ('/srv/worker/app/clients/http.py', "post", "resp = self.session.post(url, json=body, timeout=self.timeout)"),
    ("/srv/worker/venv/lib/python3.11/site-packages/requests/adapters.py", "send",
     "raise ReadTimeout(e, request=request)"),
]
PY_ERRORS = ["requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='smtp-relay.example.net', port=443): "
             "Read timed out. (read timeout=10)", "PIL.UnidentifiedImageError: cannot identify image file "
             "<_io.BytesIO object at 0x7f{addr}>", "KeyError: 'customer_id'"]


def worker_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    tasks = weighted(rng, n, WORKER_TASKS, [30, 25, 10, 10, 3, 5, 12, 5])
    kind = weighted(rng, n, ["received", "succeeded", "retry", "failed"], [48, 47, 3, 2])
    # a task is logged when received and again when it ends: the end line repeats a recent id
    fresh = np.arange(n)
    ended = np.flatnonzero(np.isin(np.array(kind), ["succeeded", "retry", "failed"]))
    fresh[ended] = np.maximum(0, ended - rng.integers(1, 40, len(ended)))
    drawn, drawn2 = hex_ids(rng, n, 16), hex_ids(rng, n, 16)
    uuids = [drawn[i] for i in fresh.tolist()]
    uuids2 = [drawn2[i] for i in fresh.tolist()]
    secs = rng.lognormal(np.log(0.4), 1.2, n).tolist()
    workers = rng.integers(1, 9, n).tolist()
    out = []
    for i in range(n):
        task_id = f"{uuids[i][:8]}-{uuids[i][8:12]}-4{uuids[i][13:16]}-a{uuids2[i][1:4]}-{uuids2[i][4:16]}"
        if kind[i] == "received":
            out.append(f"[INFO] celery.worker.strategy: Task app.tasks.{tasks[i]}[{task_id}] received "
                       f"(worker-{workers[i]})")
        elif kind[i] == "succeeded":
            out.append(f"[INFO] celery.app.trace: Task app.tasks.{tasks[i]}[{task_id}] succeeded in "
                       f"{secs[i]:.3f}s: None")
        elif kind[i] == "retry":
            out.append(f"[WARNING] celery.app.trace: Task app.tasks.{tasks[i]}[{task_id}] retry: Retry in 60s")
        else:
            depth = int(rng.integers(2, len(PY_FRAMES) + 1))
            frames = "\n".join(f'  File "{f}", line {int(rng.integers(20, 700))}, in {fn.format(task=tasks[i])}\n'
                               f"    {code}" for f, fn, code in PY_FRAMES[:depth])
            error = PY_ERRORS[int(rng.integers(0, len(PY_ERRORS)))].format(addr=uuids2[i][:10])
            out.append(f"[ERROR] celery.app.trace: Task app.tasks.{tasks[i]}[{task_id}] raised unexpected: "
                       f"{error.split(':')[0]}\nTraceback (most recent call last):\n{frames}\n{error}")
    return out


EDGE_POPS = ["fra1", "ams2", "cdg1", "mad1", "waw1", "arn1"]
EDGE_MSGS = [("info", "cache hit", 60), ("info", "cache miss", 25), ("info", "revalidated", 8),
             ("warn", "origin slow", 4), ("error", "origin unreachable", 0.5), ("info", "purge", 0.5)]


def edge_bodies(rng: np.random.Generator, v: Vocabularies, n: int, line0: int) -> list[str]:
    msgs = weighted(rng, n, EDGE_MSGS, [w for *_, w in EDGE_MSGS])
    pops = weighted(rng, n, EDGE_POPS, [30, 25, 20, 10, 8, 7])
    assets = v.assets.draw(rng, n)
    sizes = lognormal_ints(rng, n, 24_000, 1.2)
    up = lognormal_ints(rng, n, 40, 1.0)
    ips = v.client_ips.draw(rng, n)
    out = []
    for i in range(n):
        level, msg, _ = msgs[i]
        status = 502 if msg == "origin unreachable" else 200
        out.append(f'level={level} msg="{msg}" pop={pops[i]} client={ips[i]} path={assets[i]} status={status} '
                   f'bytes={sizes[i]} upstream_ms={up[i] if msg != "cache hit" else 0}')
    return out


@dataclass(frozen=True)
class Service:
    name: str
    file_stem: str
    share: float  # of the timestamped bytes
    bodies: Callable[[np.random.Generator, Any, int, int], list[str]]  # (rng, the style's vocab, lines, first line)
    stamp: Callable[[np.ndarray], list[str]]
    form: str
    gzip_rotated: bool
    resolution_ms: int = 1  # syslog stamps whole seconds; the manifest records what the file shows
    rotated_suffix: str = "-%Y%m%d"  # strftime of a rotated day after "<stem>.log": logrotate's dateext


SERVICES = [
    Service("gateway", "access", 0.30, gateway_bodies, stamp_iso_utc, "ISO-8601 UTC (Z)", True),
    Service("payments", "payments", 0.22, payments_bodies, stamp_log4j, "log4j YYYY-MM-DD HH:MM:SS,mmm", False),
    Service("auth", "auth", 0.12, auth_bodies, stamp_syslog, "syslog MMM dd HH:MM:SS", True, 1000),
    Service("orders", "orders", 0.18, orders_bodies, stamp_epoch_ms, "epoch ms + JSON", False),
    Service("worker", "worker", 0.10, worker_bodies, stamp_log4j, "Python logging, tracebacks", False),
    Service("edge", "edge", 0.08, edge_bodies, stamp_iso_plus2, "ISO-8601 +02:00", False),
]


# ---- the hdfs style: one Hadoop cluster's namenode and four datanodes ------------------------------
# Hadoop 2.x/3.x log with log4j's default layout `%d{ISO8601} %p %c: %m%n`: stamp_log4j, then
# "<LEVEL> <logger>: <message>". The datanodes' lines name the blocks the namenode hands out.

HDFS = "org.apache.hadoop.hdfs"
DN_LOG = f"{HDFS}.server.datanode.DataNode"
HDFS_FORM = "Hadoop log4j YYYY-MM-DD HH:MM:SS,mmm"
HDFS_ROTATED = ".%Y-%m-%d"  # log4j's DailyRollingFileAppender: hadoop-hdfs-namenode-nn1.log.2024-10-07
# formatted by the namenode (10.10.34.11) a week before the default start: one block pool, for good
BLOCK_POOL = "BP-1081411623-10.10.34.11-1727694360971"
FIRST_BLOCK = 1_073_741_825  # the first block id of a fresh HDFS (2**30 + 1); ids then rise by one
FIRST_GENSTAMP = 1001  # the first generation stamp; it rises with every block allocated
FULL_BLOCK = 134_217_728  # dfs.blocksize (128 MiB): most blocks of big files are full
DN_PORT = 9866
RM_START = 1727694512345  # the YARN ResourceManager's start, in every application and job id
CLIENT_IPS = [f"10.10.34.{i}" for i in range(16, 41)]  # the compute nodes, HDFS's clients
HADOOP_USERS = ["hive", "spark", "etl", "airflow", "mapred", "hbase"]
DATASETS = ["events", "clicks", "sessions", "features", "exports", "raw", "orders", "metrics", "models", "checkpoints"]
HIVE_TABLES = [("sales", "orders"), ("sales", "order_items"), ("sales", "refunds"), ("web", "pageviews"),
               ("web", "sessions"), ("web", "referrers"), ("ops", "host_metrics"), ("ops", "alerts"),
               ("finance", "ledger"), ("finance", "invoices"), ("ml", "training_set"), ("ml", "predictions")]
STAGING_FILES = ["job.jar", "job.split", "job.splitmetainfo", "job.xml"]
# one namenode line in 16 allocates a block: a power of two, so line0 * rate is whole at every block
NN_BLOCKS_PER_LINE = 1 / 16
NN_SHARE = 0.35
# average line lengths (timestamp and newline included) measured on a 20 MB corpus; their ratio
# sets how many blocks a datanode's line moves on, so its ids keep pace with the namenode's in time
NN_LINE_BYTES = 235
DN_LINE_BYTES = 283


@dataclass(frozen=True)
class DataNodeHost:
    name: str
    ip: str
    uuid: str  # the datanode's srvID in clienttrace lines, fixed for its life
    storage: str  # its one volume's storage id


DATANODES = [
    DataNodeHost("dn01", "10.10.34.12", "5c1d8a3e-6f2b-4e0a-9b7d-1f3c2a4e8d90",
                 "DS-0f4e8b2a-7c91-4d3e-a5b6-c8d9e0f1a2b3"),
    DataNodeHost("dn02", "10.10.34.13", "a7e3c915-2d4b-4f86-8c1e-93b5d0f7a264",
                 "DS-3b9d1c7e-5a2f-4e68-b0c4-7d1e9f3a5b82"),
    DataNodeHost("dn03", "10.10.34.14", "e2b64f0d-81c7-4a39-b5e2-0c6d7f1a9e35",
                 "DS-8e2a6f4c-1b7d-4c93-9e05-a3f7b1d6c048"),
    DataNodeHost("dn04", "10.10.34.15", "39f0a6c2-d4e8-4b17-a63f-5e8c2b9d1f70",
                 "DS-c61f3b8d-9e2a-4d75-8b1c-f04a7e2d6c19"),
]
DATANODE_SHARES = [0.17, 0.165, 0.16, 0.155]  # together 0.65: not every node takes the same load


@dataclass
class HdfsVocabularies:
    paths: Vocab
    owners: dict[str, str]  # path -> the user who writes and reads it
    clients: Vocab  # DFSClient ids of the client processes
    client_ips: Vocab
    users: Vocab

    @classmethod
    def build(cls, rng: np.random.Generator) -> HdfsVocabularies:
        people = [f"{first[0]}{last}" for first, last in zip(FIRST.split(), LAST.split(), strict=False)]  # logins
        rng.shuffle(people)
        users = HADOOP_USERS + people[:30]
        n = 12_000  # paths drawn (a few repeat)
        owner_of = Vocab(users, 1.1).draw(rng, n)
        kinds = weighted(rng, n, ["data", "staging", "hive", "hive_tmp", "yarn_logs", "spark_history"],
                         [40, 15, 20, 8, 10, 7])
        uuids = [a + b for a, b in zip(hex_ids(rng, n, 16), hex_ids(rng, n, 16), strict=True)]
        jobs = rng.integers(1, 9999, n).tolist()
        parts = rng.integers(0, 400, n).tolist()
        months = rng.integers(8, 11, n).tolist()
        days = rng.integers(1, 29, n).tolist()
        paths, owners = [], {}
        job_uuids: dict[tuple[str, str, str], str] = {}
        for i in range(n):
            user, u, kind = owner_of[i], uuids[i], kinds[i]
            date = f"2024-{months[i]:02d}-{days[i]:02d}"
            uuid = f"{u[:8]}-{u[8:12]}-4{u[13:16]}-a{u[17:20]}-{u[20:32]}"
            if kind == "data":
                # a Spark job's part files share its uuid: one per user, dataset and day
                dataset = DATASETS[jobs[i] % len(DATASETS)]
                uuid = job_uuids.setdefault((user, dataset, date), uuid)
                path = f"/user/{user}/{dataset}/dt={date}/part-{parts[i]:05d}-{uuid}-c000.snappy.parquet"
            elif kind == "staging":
                path = f"/user/{user}/.staging/job_{RM_START}_{jobs[i]:04d}/{STAGING_FILES[parts[i] % 4]}"
            elif kind == "hive":
                db, table = HIVE_TABLES[jobs[i] % len(HIVE_TABLES)]
                user, path = "hive", f"/apps/hive/warehouse/{db}.db/{table}/dt={date}/{parts[i]:06d}_0"
            elif kind == "hive_tmp":
                path = f"/tmp/hive/{user}/{uuid}/_tmp_space.db"
            elif kind == "yarn_logs":
                path = (f"/tmp/logs/{user}/logs-tfile/application_{RM_START}_{jobs[i]:04d}/"
                        f"cn{16 + parts[i] % 25:02d}.hadoop.example.net_45454")
            else:
                user, path = "spark", f"/spark-history/application_{RM_START}_{jobs[i]:04d}"
            if path not in owners:
                paths.append(path)
                owners[path] = user
        clients = [f"DFSClient_NONMAPREDUCE_{c}_{k}" for c, k in
                   zip(rng.integers(-2**31, 2**31, 3000).tolist(), Vocab([str(k) for k in range(1, 60)], 1.5)
                       .draw(rng, 3000), strict=True)]
        ips = list(CLIENT_IPS)
        rng.shuffle(ips)
        return cls(Vocab(paths, 1.0), owners, Vocab(clients, 0.8), Vocab(ips, 0.6), Vocab(users, 1.1))


def blk(block_id: int) -> str:
    """blk_<id>_<generation stamp>: one stamp per block allocated, so both rise together."""
    return f"blk_{block_id}_{block_id - FIRST_BLOCK + FIRST_GENSTAMP}"


def block_sizes(rng: np.random.Generator, n: int, full: float, median: float) -> list[int]:
    """Bytes of a block or a transfer: a spike of full blocks (big files), the rest log-normal."""
    sizes = np.minimum(FULL_BLOCK, np.maximum(1, rng.lognormal(np.log(median), 1.8, n))).astype(np.int64)
    return np.where(rng.random(n) < full, FULL_BLOCK, sizes).tolist()


def transfer_ns(rng: np.random.Generator, sizes: list[int]) -> list[int]:
    """A transfer's duration: its bytes at a disk/network rate (~120 MB/s, varying) plus the set-up."""
    n = len(sizes)
    rate = rng.lognormal(np.log(120e6), 0.5, n)
    setup = rng.lognormal(np.log(300_000), 1.0, n)
    return (np.asarray(sizes) / rate * 1e9 + setup).astype(np.int64).tolist()


def block_ids(rng: np.random.Generator, n: int, line0: int, per_line: float, lag: np.ndarray) -> list[int]:
    """Recent block ids for lines line0.. (never before the first block the cluster handed out);
    lag per line: how many blocks back a line may look (a write names a block just allocated, a read
    one written long ago)."""
    handed_out = round(line0 * per_line) + (np.arange(n) * per_line).astype(np.int64)
    # early on a line looks back over the blocks there are, not past the first one
    ids = recent_ids(rng, n, FIRST_BLOCK - 1 + round(line0 * per_line), per_line, np.clip(handed_out, 1, lag))
    return np.maximum(FIRST_BLOCK, ids).tolist()


NN_EVENTS = [("audit", 64), ("added", 20), ("complete", 5), ("editlog", 4), ("invalidate", 2), ("committed", 0.5),
             ("placement", 0.2), ("rename_failed", 0.1), ("pause", 0.05)]
AUDIT_CMDS = [("getfileinfo", 34), ("open", 26), ("listStatus", 14), ("create", 8), ("delete", 7), ("rename", 6),
              ("mkdirs", 3)]
GC_POOLS = ["G1 Young Generation", "G1 Old Generation"]


def audit_line(cmd: str, user: str, ip: str, path: str, allowed: bool) -> str:
    src, dst, perm = path, "null", "null"
    if cmd in ("listStatus", "mkdirs"):
        src = path.rsplit("/", 1)[0]
    if cmd == "create":
        perm = f"{user}:supergroup:rw-r--r--"
    elif cmd == "mkdirs":
        perm = f"{user}:supergroup:rwxr-xr-x"
    elif cmd == "rename":
        src, dst, perm = f"{path}._COPYING_", path, f"{user}:supergroup:rw-r--r--"
    return (f"INFO {HDFS}.server.namenode.FSNamesystem.audit: allowed={'true' if allowed else 'false'}\t"
            f"ugi={user} (auth:SIMPLE)\tip=/{ip}\tcmd={cmd}\tsrc={src}\tdst={dst}\tperm={perm}\tproto=rpc")


def namenode_bodies(rng: np.random.Generator, v: HdfsVocabularies, n: int, line0: int) -> list[str]:
    # every 16th line allocates the next block, so allocated ids are exactly consecutive
    position = line0 + np.arange(n)
    before = np.floor(position * NN_BLOCKS_PER_LINE).astype(np.int64)
    allocates = (np.floor((position + 1) * NN_BLOCKS_PER_LINE).astype(np.int64) > before).tolist()
    new_ids = (FIRST_BLOCK + before).tolist()
    events = weighted(rng, n, NN_EVENTS, [w for _, w in NN_EVENTS])
    # replicas report a block just allocated; deletions name older ones (offset further below)
    recent = block_ids(rng, n, line0, NN_BLOCKS_PER_LINE, np.full(n, 6))
    cmds = weighted(rng, n, AUDIT_CMDS, [w for _, w in AUDIT_CMDS])
    paths = v.paths.draw(rng, n)
    strangers = v.users.draw(rng, n)
    allowed = (rng.random(n) >= 0.003).tolist()  # a user reading someone else's data is refused
    ips = v.client_ips.draw(rng, n)
    clients = v.clients.draw(rng, n)
    pipelines = np.argsort(rng.random((n, len(DATANODES))), axis=1)[:, :3].tolist()  # 3 replicas of 4 nodes
    sizes = block_sizes(rng, n, 0.35, 8_000_000)
    numbers = rng.integers(1, 60, (n, 4)).tolist()
    old = rng.integers(400, 5000, n).tolist()
    again = (rng.random(n) < 0.45).tolist()  # a client's calls come in runs on one file: getfileinfo, open, ...
    last = (paths[0], ips[0])
    out = []
    for i in range(n):
        path, replicas = paths[i], [DATANODES[d].ip for d in pipelines[i]]
        if allocates[i]:
            out.append(f"INFO {HDFS}.StateChange: BLOCK* allocate {blk(new_ids[i])}, replicas="
                       + ", ".join(f"{ip}:{DN_PORT}" for ip in replicas) + f" for {path}")
            continue
        event, a, b, c, d = events[i][0], *numbers[i]
        if event == "audit":
            path, ip = last if again[i] else (path, ips[i])
            last = (path, ip)
            user = v.owners[path] if allowed[i] else strangers[i]
            out.append(audit_line(cmds[i][0], user, ip, path, allowed[i]))
        elif event == "added":
            out.append(f"INFO BlockStateChange: BLOCK* addStoredBlock: {replicas[0]}:{DN_PORT} is added to "
                       f"{blk(recent[i])} (size={sizes[i]})")
        elif event == "complete":
            out.append(f"INFO {HDFS}.StateChange: DIR* completeFile: {path} is closed by {clients[i]}")
        elif event == "editlog":
            out.append(f"INFO {HDFS}.server.namenode.FSEditLog: Number of transactions: {a * 3} Total time for "
                       f"transactions(ms): {b // 6} Number of transactions batched in Syncs: {c // 4} Number of "
                       f"syncs: {a * 2} SyncTimes(ms): {d * 2}")
        elif event == "invalidate":
            first = max(FIRST_BLOCK, recent[i] - old[i])
            gone = ", ".join(blk(first + k * (1 + d % 3)) for k in range(1 + a % 5))
            out.append(f"INFO BlockStateChange: BLOCK* BlockManager: ask {replicas[0]}:{DN_PORT} to delete [{gone}]")
        elif event == "committed":
            out.append(f"INFO {HDFS}.StateChange: BLOCK* {blk(recent[i])} is COMMITTED but not COMPLETE(numNodes= 0 "
                       f"<  minimum = 1) in file {path}")
        elif event == "placement":
            out.append(f"WARN {HDFS}.server.blockmanagement.BlockPlacementPolicy: Failed to place enough replicas, "
                       "still in need of 1 to reach 3 (unavailableStorages=[], storagePolicy=BlockStoragePolicy{HOT:7, "
                       "storageTypes=[DISK], creationFallbacks=[], replicationFallbacks=[ARCHIVE]}, newBlock=true) "
                       "For more information, please enable DEBUG log level on "
                       f"{HDFS}.server.blockmanagement.BlockPlacementPolicy")
        elif event == "rename_failed":
            out.append(f"WARN {HDFS}.StateChange: DIR* FSDirectory.unprotectedRenameTo: failed to rename "
                       f"{path}._COPYING_ to {path} because destination exists")
        else:  # a GC pause: JvmPauseMonitor writes the pool on a second line
            out.append(f"WARN org.apache.hadoop.util.JvmPauseMonitor: Detected pause in JVM or host machine (eg GC): "
                       f"pause of approximately {1000 + a * 97}ms\nGC pool '{GC_POOLS[b % 2]}' had collection(s): "
                       f"count=1 time={1000 + a * 95}ms")
    return out


# (event, weight, how many blocks back its block may be): a write's lines follow the block's allocation
# within seconds, reads and deletions name blocks written long before
DN_EVENTS = [("receiving", 15, 12), ("write", 15, 12), ("responder", 15, 12), ("received", 15, 12),
             ("read", 28, 3000), ("deleted", 8, 800), ("slow", 1.6, 12), ("scanner", 0.3, 1), ("report", 0.1, 1),
             ("eof", 0.2, 12), ("timeout", 0.1, 3000)]
SLOW_WRITES = ["Slow BlockReceiver write packet to mirror took {ms}ms (threshold=300ms), downstream DNs=[{down}], "
               "blockId={id}", "Slow BlockReceiver write data to disk cost:{ms}ms (threshold=300ms), "
               "volume=file:/data/dfs/dn/, blockId={id}"]
# a code path throws from the same frames every time (Hadoop 3.3's line numbers)
PREMATURE_EOF = "\n".join(["java.io.IOException: Premature EOF from inputStream", *(f"\tat {frame}" for frame in [
    "org.apache.hadoop.io.IOUtils.readFully(IOUtils.java:211)",
    f"{HDFS}.protocol.datatransfer.PacketReceiver.doReadFully(PacketReceiver.java:211)",
    f"{HDFS}.protocol.datatransfer.PacketReceiver.doRead(PacketReceiver.java:134)",
    f"{HDFS}.protocol.datatransfer.PacketReceiver.receiveNextPacket(PacketReceiver.java:109)",
    f"{HDFS}.server.datanode.BlockReceiver.receivePacket(BlockReceiver.java:551)",
    f"{HDFS}.server.datanode.BlockReceiver.receiveBlock(BlockReceiver.java:1011)",
    f"{HDFS}.server.datanode.DataXceiver.writeBlock(DataXceiver.java:920)",
    f"{HDFS}.protocol.datatransfer.Receiver.opWriteBlock(Receiver.java:176)",
    f"{HDFS}.protocol.datatransfer.Receiver.processOp(Receiver.java:110)",
    f"{HDFS}.server.datanode.DataXceiver.run(DataXceiver.java:299)",
    "java.lang.Thread.run(Thread.java:750)"])])
SOCKET_TIMEOUT_FRAMES = "\n".join(f"\tat {frame}" for frame in [
    "org.apache.hadoop.net.SocketIOWithTimeout.waitForIO(SocketIOWithTimeout.java:246)",
    "org.apache.hadoop.net.SocketOutputStream.waitForWritable(SocketOutputStream.java:166)",
    "org.apache.hadoop.net.SocketOutputStream.transferToFully(SocketOutputStream.java:214)",
    f"{HDFS}.server.datanode.FileIoProvider.transferToSocketFully(FileIoProvider.java:280)",
    f"{HDFS}.server.datanode.BlockSender.sendPacket(BlockSender.java:620)",
    f"{HDFS}.server.datanode.BlockSender.doSendBlock(BlockSender.java:804)",
    f"{HDFS}.server.datanode.BlockSender.sendBlock(BlockSender.java:751)",
    f"{HDFS}.server.datanode.DataXceiver.readBlock(DataXceiver.java:607)",
    f"{HDFS}.protocol.datatransfer.Receiver.opReadBlock(Receiver.java:152)",
    f"{HDFS}.protocol.datatransfer.Receiver.processOp(Receiver.java:104)",
    f"{HDFS}.server.datanode.DataXceiver.run(DataXceiver.java:299)",
    "java.lang.Thread.run(Thread.java:750)"])


def datanode_bodies(node: DataNodeHost, per_line: float, rng: np.random.Generator, v: HdfsVocabularies, n: int,
                    line0: int) -> list[str]:
    events = weighted(rng, n, DN_EVENTS, [w for _, w, _ in DN_EVENTS])
    ids = block_ids(rng, n, line0, per_line, np.array([lag for *_, lag in events]))
    others = [d.ip for d in DATANODES if d is not node]
    # a pipeline's first node hears from the client, the others from the node before them
    upstream = weighted(rng, n, [*others, "client"], [1, 1, 1, 1.5])
    ips = v.client_ips.draw(rng, n)
    ports = rng.integers(30_000, 61_000, n).tolist()
    clients = v.clients.draw(rng, n)
    written = block_sizes(rng, n, 0.35, 8_000_000)
    read = block_sizes(rng, n, 0.15, 1_000_000)
    write_ns, read_ns = transfer_ns(rng, written), transfer_ns(rng, read)
    last = (rng.random(n) < 1 / 3).tolist()  # one node in three ends its pipeline
    numbers = rng.integers(1, 1000, (n, 2)).tolist()
    reports = hex_ids(rng, n, 16)
    host = f"{node.name}.hadoop.example.net:{DN_PORT}"
    me = f"/{node.ip}:{DN_PORT}"
    out = []
    for i in range(n):
        event, block, (a, b) = events[i][0], f"{BLOCK_POOL}:{blk(ids[i])}", numbers[i]
        src = f"/{ips[i] if upstream[i] == 'client' else upstream[i]}:{ports[i]}"
        if event == "receiving":
            out.append(f"INFO {DN_LOG}: Receiving {block} src: {src} dest: {me}")
        elif event == "write":
            out.append(f"INFO {DN_LOG}.clienttrace: src: {src}, dest: {me}, bytes: {written[i]}, op: HDFS_WRITE, "
                       f"cliID: {clients[i]}, offset: 0, srvID: {node.uuid}, blockid: {block}, "
                       f"duration(ns): {write_ns[i]}")
        elif event == "responder":
            if last[i]:
                out.append(f"INFO {DN_LOG}: PacketResponder: {block}, type=LAST_IN_PIPELINE terminating")
            else:
                out.append(f"INFO {DN_LOG}: PacketResponder: {block}, type=HAS_DOWNSTREAM_IN_PIPELINE, "
                           f"downstreams=1:[{others[a % 3]}:{DN_PORT}] terminating")
        elif event == "received":
            out.append(f"INFO {DN_LOG}: Received {block} size {written[i]} from {src}")
        elif event == "read":
            out.append(f"INFO {DN_LOG}.clienttrace: src: {me}, dest: /{ips[i]}:{ports[i]}, bytes: {read[i]}, "
                       f"op: HDFS_READ, cliID: {clients[i]}, offset: 0, srvID: {node.uuid}, blockid: {block}, "
                       f"duration(ns): {read_ns[i]}")
        elif event == "deleted":
            # a finalized replica's directory comes from its id, as FsDatasetImpl lays them out
            subdirs = f"subdir{(ids[i] >> 16) & 0x1F}/subdir{(ids[i] >> 8) & 0x1F}"
            out.append(f"INFO {DN_LOG.removesuffix('DataNode')}fsdataset.impl.FsDatasetAsyncDiskService: Deleted "
                       f"{BLOCK_POOL} {blk(ids[i])} URI file:/data/dfs/dn/current/{BLOCK_POOL}/current/finalized/"
                       f"{subdirs}/blk_{ids[i]}")
        elif event == "slow":
            template = SLOW_WRITES[a % 2]
            out.append(f"WARN {DN_LOG}: " + template.format(ms=300 + a, down=f"{others[b % 3]}:{DN_PORT}", id=ids[i]))
        elif event == "scanner":
            scanner = f"VolumeScanner(/data/dfs/dn, {node.storage})"
            out.append(f"INFO {DN_LOG.removesuffix('DataNode')}VolumeScanner: " + (
                f"{scanner}: finished scanning block pool {BLOCK_POOL}" if a % 2 else
                f"{scanner}: no suitable block pools found to scan.  Waiting {1_814_400_000 - a * 1000 - b} ms."))
        elif event == "report":
            out.append(f"INFO {DN_LOG}: Successfully sent block report 0x{reports[i]}, containing 1 storage "
                       f"report(s), of which we sent 1. The reports had {(ids[i] - FIRST_BLOCK) * 3 // 5 + 1} total "
                       f"blocks and used 1 RPC(s). This took {1 + a // 100} msecs to generate and {b // 10 + 2} msecs "
                       "for RPC and NN processing. Got back one command: FinalizeCommand/5.")
        elif event == "eof":
            out.append(f"ERROR {DN_LOG}: {host}:DataXceiver error processing WRITE_BLOCK operation  src: {src} "
                       f"dst: {me}\n{PREMATURE_EOF}")
        else:
            client = f"/{ips[i]}:{ports[i]}"
            out.append(f"WARN {DN_LOG}: {host}:DataXceiver error processing READ_BLOCK operation  src: {me} dst: "
                       f"{client}\njava.net.SocketTimeoutException: 480000 millis timeout while waiting for channel to "
                       f"be ready for write. ch : java.nio.channels.SocketChannel[connected local={me} "
                       f"remote={client}]\n{SOCKET_TIMEOUT_FRAMES}")
    return out


def datanode_service(node: DataNodeHost, share: float) -> Service:
    # the cluster's blocks over this node's lines: a datanode's line moves on fewer blocks than the
    # namenode's as the node writes fewer, longer lines
    per_line = NN_BLOCKS_PER_LINE * (NN_SHARE / NN_LINE_BYTES) / (share / DN_LINE_BYTES)
    return Service(f"datanode-{node.name[2:]}", f"hadoop-hdfs-datanode-{node.name}", share,
                   functools.partial(datanode_bodies, node, per_line), stamp_log4j, HDFS_FORM, True,
                   rotated_suffix=HDFS_ROTATED)


HDFS_SERVICES = [
    Service("namenode", "hadoop-hdfs-namenode-nn1", NN_SHARE, namenode_bodies, stamp_log4j, HDFS_FORM, False,
            rotated_suffix=HDFS_ROTATED),
    *(datanode_service(node, share) for node, share in zip(DATANODES, DATANODE_SHARES, strict=True)),
]


@dataclass(frozen=True)
class Style:
    services: list[Service]
    vocabularies: Callable[[np.random.Generator], Any]
    no_timestamp_share: float  # of the bytes, in a file without timestamps (0: no such file)


STYLES = {
    "mixed": Style(SERVICES, Vocabularies.build, NO_TIMESTAMP_SHARE),
    "hdfs": Style(HDFS_SERVICES, HdfsVocabularies.build, 0.0),
}


# ---- time: bytes → timestamps through a day/night traffic curve ----------------------------------

class Timeline:
    """Maps the fraction of a service's bytes written so far to a timestamp, so traffic is heavier
    by day (UTC) than by night and the whole service spans [start, start + days)."""

    def __init__(self, start_ms: int, days: int) -> None:
        minutes = np.arange(days * 1440 + 1, dtype=np.float64)
        hour = (minutes % 1440) / 60.0
        rate = 1.0 + 0.7 * np.sin((hour - 9.0) / 24.0 * 2 * np.pi)  # peak mid-afternoon, trough at night
        cumulative = np.concatenate([[0.0], np.cumsum(rate[:-1])])
        self.fraction = cumulative / cumulative[-1]
        self.ms = start_ms + minutes * 60_000.0

    def at(self, fraction: np.ndarray) -> np.ndarray:
        return np.interp(fraction, self.fraction, self.ms).astype(np.int64)


# ---- writing -----------------------------------------------------------------------------------

@dataclass
class FileInfo:
    path: str  # relative to the corpus root
    service: str
    form: str
    compressed: bool
    raw_bytes: int = 0
    stored_bytes: int = 0
    lines: int = 0
    messages: int = 0
    first_ts: int | None = None
    last_ts: int | None = None


class DayFiles:
    """One open output file per UTC day of a service; rotated days gzip-compressed if asked."""

    def __init__(self, root: Path, service: Service, start_ms: int, days: int) -> None:
        self.root, self.service, self.start_ms, self.days = root, service, start_ms, days
        self.current: tuple[int, object, FileInfo] | None = None
        self.files: list[FileInfo] = []

    def _name(self, day: int) -> tuple[str, bool]:
        if day == self.days - 1:
            return f"{self.service.name}/{self.service.file_stem}.log", False
        date = datetime.fromtimestamp((self.start_ms + day * DAY_MS) / 1000, UTC).strftime(self.service.rotated_suffix)
        compressed = self.service.gzip_rotated
        return f"{self.service.name}/{self.service.file_stem}.log{date}" + (".gz" if compressed else ""), compressed

    def _open(self, day: int) -> tuple[object, FileInfo]:
        self.close()
        rel, compressed = self._name(day)
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        # no name and mtime 0 in the gzip header: the same seed gives byte-identical files
        handle = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) if compressed else raw
        info = FileInfo(rel, self.service.name, self.service.form, compressed)
        self.files.append(info)
        self.current = (day, (handle, raw), info)
        return (handle, raw), info

    def write(self, day: int, text: str, lines: int, messages: int, first_ts: int, last_ts: int) -> None:
        if self.current is not None and self.current[0] == day:
            handles, info = self.current[1], self.current[2]
        else:
            handles, info = self._open(day)
        data = text.encode("ascii")
        handles[0].write(data)
        info.raw_bytes += len(data)
        info.lines += lines
        info.messages += messages
        info.first_ts = first_ts if info.first_ts is None else info.first_ts
        info.last_ts = last_ts

    def close(self) -> None:
        if self.current is None:
            return
        (handle, raw), info = self.current[1], self.current[2]
        if handle is not raw:
            handle.close()
        raw.close()
        info.stored_bytes = (self.root / info.path).stat().st_size
        self.current = None


def write_service(root: Path, service: Service, target_bytes: int, rng: np.random.Generator, vocab: Vocabularies,
                  timeline: Timeline, start_ms: int, days: int, progress: Callable[[int], None]) -> list[FileInfo]:
    files = DayFiles(root, service, start_ms, days)
    stamp_width = len(service.stamp(np.array([start_ms], dtype=np.int64))[0])
    written = lines = 0
    try:
        while written < target_bytes:
            bodies = service.bodies(rng, vocab, BLOCK_LINES, lines)
            lines += BLOCK_LINES
            lengths = np.fromiter((len(b) for b in bodies), dtype=np.int64, count=len(bodies)) + stamp_width + 2
            ends = written + np.cumsum(lengths)
            keep = int(np.searchsorted(ends, target_bytes, side="left")) + 1  # the line that crosses the target
            keep = min(keep, len(bodies))
            bodies, ends = bodies[:keep], ends[:keep]
            starts = ends - lengths[:keep]
            ts = timeline.at(starts / max(target_bytes, 1))
            ts -= ts % service.resolution_ms
            stamps = service.stamp(ts)
            day_of = (ts - start_ms) // DAY_MS
            cuts = np.flatnonzero(np.diff(day_of)) + 1
            for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), keep], strict=True):
                text = "".join(f"{s} {b}\n" for s, b in zip(stamps[lo:hi], bodies[lo:hi], strict=True))
                files.write(int(day_of[lo]), text, text.count("\n"), hi - lo, int(ts[lo]), int(ts[hi - 1]))
            written = int(ends[-1])
            progress(int(lengths[:keep].sum()))
    finally:
        files.close()
    return files.files


BACKUP_DIRS = ["var/lib/postgresql/15/main/base", "srv/uploads/images", "srv/uploads/invoices", "etc/nginx/conf.d",
               "home/deploy/releases"]


def write_no_timestamp_file(root: Path, target_bytes: int, rng: np.random.Generator,
                            progress: Callable[[int], None]) -> FileInfo:
    """rsync's output: no line carries a timestamp, so the ingest keeps it apart (never expires)."""
    rel = "backup/rsync-nightly.out"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    info = FileInfo(rel, "backup", "no timestamp", False)
    lines = ["sending incremental file list"]
    size = len(lines[0]) + 1
    while size < target_bytes:
        d = BACKUP_DIRS[int(rng.integers(0, len(BACKUP_DIRS)))]
        line = f"{d}/{int(rng.integers(10_000, 99_999))}/{hex_ids(rng, 1, 12)[0]}.dat"
        if rng.random() < 0.02:
            line = f"deleting {line}"
        lines.append(line)
        size += len(line) + 1
    lines.append(f"sent {size * 37:,} bytes  received {int(rng.integers(1000, 9000)):,} bytes  "
                 f"{int(rng.integers(10_000_000, 90_000_000)):,}.00 bytes/sec")
    lines.append(f"total size is {size * 4100:,}  speedup is {rng.random() * 100 + 20:.2f}")
    text = "\n".join(lines) + "\n"
    path.write_bytes(text.encode("ascii"))
    info.raw_bytes = info.stored_bytes = len(text)
    info.lines = info.messages = len(lines)
    progress(len(text))
    return info


def generate(out_dir: str | Path, size_bytes: int, seed: int = 7, start: str = DEFAULT_START, days: int = 7,
             progress: Callable[[int], None] | None = None, style: str = "mixed") -> dict:
    """Write the corpus under out_dir/logs and out_dir/manifest.json; returns the manifest."""
    if style not in STYLES:
        raise ValueError(f"--style {style!r}: expected one of {', '.join(STYLES)}")
    if size_bytes < 10_000:
        raise ValueError(f"--size {size_bytes} bytes is too small: at least 10000 bytes")
    if days < 1:
        raise ValueError(f"--days {days}: at least 1")
    out = Path(out_dir)
    root = out / "logs"
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty: generate into a fresh directory")
    start_ms = int(datetime.fromisoformat(start).replace(tzinfo=UTC).timestamp() * 1000)
    report = progress or (lambda n: None)
    chosen = STYLES[style]
    rng = np.random.default_rng(seed)
    vocab = chosen.vocabularies(rng)
    timeline = Timeline(start_ms, days)
    no_ts_bytes = max(2000, int(size_bytes * chosen.no_timestamp_share)) if chosen.no_timestamp_share else 0
    timestamped = size_bytes - no_ts_bytes
    files: list[FileInfo] = []
    for index, service in enumerate(chosen.services):
        # each service draws from its own stream, so one service's volume never changes another's text
        service_rng = np.random.default_rng([seed, index])
        files += write_service(root, service, int(timestamped * service.share), service_rng, vocab, timeline,
                               start_ms, days, report)
    if no_ts_bytes:
        files.append(write_no_timestamp_file(root, no_ts_bytes, np.random.default_rng([seed, 99]), report))
    manifest = {
        "seed": seed, "style": style, "size": size_bytes, "start_ms": start_ms, "end_ms": start_ms + days * DAY_MS,
        "days": days,
        "raw_bytes": sum(f.raw_bytes for f in files), "stored_bytes": sum(f.stored_bytes for f in files),
        "messages": sum(f.messages for f in files), "lines": sum(f.lines for f in files),
        "files": [asdict(f) for f in files],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="directory to create (logs/ and manifest.json go in it)")
    parser.add_argument("--size", default="1GB", help="uncompressed bytes to write: 1GB, 50MB, 200MiB (default 1GB)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=7, help="span of the timestamps in days (default 7)")
    parser.add_argument("--start", default=DEFAULT_START, help="first UTC day, YYYY-MM-DD (default 2024-10-07)")
    parser.add_argument("--style", default="mixed", choices=list(STYLES),
                        help="mixed: six services in six timestamp forms; hdfs: a Hadoop cluster (default mixed)")
    args = parser.parse_args(argv)
    try:
        size = parse_size(args.size)
    except ValueError:
        parser.error(f"--size {args.size!r}: expected a size like 1GB, 50MB or a number of bytes")
    started = time.perf_counter()
    done = [0, 0]

    def progress(n: int) -> None:
        done[0] += n
        if done[0] - done[1] >= 50_000_000 or done[0] >= size:
            done[1] = done[0]
            print(f"\r{done[0] / 1e6:,.0f} / {size / 1e6:,.0f} MB", end="", file=sys.stderr, flush=True)

    try:
        manifest = generate(args.out_dir, size, args.seed, args.start, args.days, progress, args.style)
    except (ValueError, FileExistsError) as e:
        print(f"\nerror: {e}", file=sys.stderr)
        sys.exit(2)
    elapsed = time.perf_counter() - started
    print(f"\r{manifest['raw_bytes'] / 1e6:,.1f} MB raw in {len(manifest['files'])} files "
          f"({manifest['stored_bytes'] / 1e6:,.1f} MB on disk), {manifest['messages']:,} messages, "
          f"{manifest['lines']:,} lines, {elapsed:.1f}s ({manifest['raw_bytes'] / 1e6 / elapsed:.1f} MB/s)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
