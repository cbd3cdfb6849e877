"""A deterministic corpus of realistic logs for the archives benchmark.

    .venv/bin/python benchmarks/gen_logs.py OUT_DIR [--size 1GB] [--seed 7] [--days 7] [--start 2024-10-07]

Writes OUT_DIR/logs/<service>/... (the files to ingest) and OUT_DIR/manifest.json (seed, span,
every file with its raw and stored size, line and message counts). Same seed and size → byte-
identical files (gzip headers carry no name or mtime).

Six services in separate files, one file per UTC day, each in a timestamp form the ingest
recognises at the start of a line:

  gateway   access log, ISO-8601 UTC            2024-10-07T13:55:36.123Z gw-2 203.0.113.7 - ... "GET /api/.." 200 ..
  payments  Java / log4j, multi-line traces    2024-10-07 13:55:36,123 ERROR [http-nio-8443-exec-7] c.e.p.X - ...
  auth      syslog (no year, no zone)          Oct  7 13:55:36 auth-01 sshd[2231]: Accepted publickey for ...
  orders    epoch milliseconds + JSON          1728309336123 {"level":"info","event":"order_created",...}
  worker    Python logging, tracebacks         2024-10-07 13:55:36,123 [INFO] worker.tasks: Task resize[..] ...
  edge      ISO-8601 with a +02:00 offset      2024-10-07T15:55:36.123+02:00 level=info msg="cache miss" ...

plus one small file without any timestamp (backup/rsync-nightly.out, ~0.2 % of the bytes). The
gateway's and auth's rotated days are gzip-compressed (level 6), as logrotate leaves them; the
last day of every service is plain.

Variable parts (users, IPs, ids, paths, durations, sizes) come from a seeded numpy generator over
precomputed vocabularies with Zipf-like popularity, plus random request/trace ids, so the data
compresses like real logs (zstd -3 keeps roughly a tenth), neither trivially nor like noise.
Timestamps rise through the span with a day/night traffic curve; within a file they never go
back. All text is ASCII, so characters are bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

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


def recent_ids(rng: np.random.Generator, n: int, first: int, per_line: float, lag: int) -> list[int]:
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
    bodies: Callable[[np.random.Generator, Vocabularies, int, int], list[str]]  # (rng, vocab, lines, first line)
    stamp: Callable[[np.ndarray], list[str]]
    form: str
    gzip_rotated: bool
    resolution_ms: int = 1  # syslog stamps whole seconds; the manifest records what the file shows


SERVICES = [
    Service("gateway", "access", 0.30, gateway_bodies, stamp_iso_utc, "ISO-8601 UTC (Z)", True),
    Service("payments", "payments", 0.22, payments_bodies, stamp_log4j, "log4j YYYY-MM-DD HH:MM:SS,mmm", False),
    Service("auth", "auth", 0.12, auth_bodies, stamp_syslog, "syslog MMM dd HH:MM:SS", True, 1000),
    Service("orders", "orders", 0.18, orders_bodies, stamp_epoch_ms, "epoch ms + JSON", False),
    Service("worker", "worker", 0.10, worker_bodies, stamp_log4j, "Python logging, tracebacks", False),
    Service("edge", "edge", 0.08, edge_bodies, stamp_iso_plus2, "ISO-8601 +02:00", False),
]


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
        date = datetime.fromtimestamp((self.start_ms + day * DAY_MS) / 1000, UTC).strftime("%Y%m%d")
        compressed = self.service.gzip_rotated
        return f"{self.service.name}/{self.service.file_stem}.log-{date}" + (".gz" if compressed else ""), compressed

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
             progress: Callable[[int], None] | None = None) -> dict:
    """Write the corpus under out_dir/logs and out_dir/manifest.json; returns the manifest."""
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
    rng = np.random.default_rng(seed)
    vocab = Vocabularies.build(rng)
    timeline = Timeline(start_ms, days)
    no_ts_bytes = max(2000, int(size_bytes * NO_TIMESTAMP_SHARE))
    timestamped = size_bytes - no_ts_bytes
    files: list[FileInfo] = []
    for service in SERVICES:
        # each service draws from its own stream, so one service's volume never changes another's text
        service_rng = np.random.default_rng([seed, SERVICES.index(service)])
        files += write_service(root, service, int(timestamped * service.share), service_rng, vocab, timeline,
                               start_ms, days, report)
    files.append(write_no_timestamp_file(root, no_ts_bytes, np.random.default_rng([seed, 99]), report))
    manifest = {
        "seed": seed, "size": size_bytes, "start_ms": start_ms, "end_ms": start_ms + days * DAY_MS, "days": days,
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
        manifest = generate(args.out_dir, size, args.seed, args.start, args.days, progress)
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
