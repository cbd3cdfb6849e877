"""Log archives: ingest and search against gzip/zstd and zgrep/zstdgrep on the same logs, in the same run.

    .venv/bin/python benchmarks/bench_archives.py [--size 1GB] [--style mixed|hdfs] [--corpus DIR] [--keep]
                                                  [--repeat 2] [--json]

The corpus comes from benchmarks/gen_logs.py (seed 7; reused when DIR already holds one, otherwise
generated there, or in a temporary directory removed at the end unless --keep). --style mixed (the
default): six services in six timestamp forms, one file per day, the gateway's and auth's rotated
days gzip-compressed, one file without timestamps; --style hdfs: a Hadoop cluster's namenode and
four datanodes in log4j's layout, the datanodes' rotated days gzip-compressed (see gen_logs.py).
A reused corpus keeps the style its manifest records (mixed when it records none). Each style has
its own queries (QUERIES, HDFS_QUERIES), of the same five kinds.

  ingest     client.archives.ingest("bench", [corpus/logs]) into a fresh workspace (SQLite metadata,
             local storage, Spark local[2] and its Python workers started before timing by a
             one-file ingest into another dataset, default archives.target_size):
             raw MB/s (uncompressed input bytes / wall time; the .gz inputs are decompressed as part
             of it) and compression ratio (raw bytes / archive bytes stored)
  gzip -6    `gzip -6 -c FILE > FILE.gz`, one file after another, over plain copies of the same files
  zstd -3    `zstd -3 -c` likewise (single-threaded, zstd's default); `zstd -3 -T2` with two threads,
             as Spark gets two cores
  search     client.archives.search("bench", QUERY, ...) over the whole dataset (a Spark job, one
             task per archive, results written to the results cache) against `zgrep -c` over the
             gzip -6 files and `zstdgrep -c` over the zstd -3 files with the equivalent grep pattern,
             and plain `grep -c` over the uncompressed files for reference. MB/s = raw corpus bytes /
             wall time. grep runs with LC_ALL=C (byte matching; the corpus is ASCII). "one day":
             the same search with --begin/--end on one UTC day (tidekeep reads only the archives and
             row groups overlapping it), grep over that day's files; MB/s counts that day's bytes.

Match counts are compared: tidekeep counts messages (a multi-line message once), grep counts
lines; the queries are chosen so that every match is on one line of a one-line message (hdfs's
literal query excepted: its exception class is on one line of each stack trace, once per message),
and a warning is printed when the counts differ. The input files are read once before any timing, so
every side starts with them in the page cache. Search figures are the best of --repeat runs; each
tidekeep query runs once untimed first (the first search of a session starts Spark's Python workers).
The table goes to stdout (stderr with --json, when stdout gets the figures as JSON); progress to
stderr. Timing never fails anything; wrong counts are reported, not raised.

To measure a committed tree while the working tree has other edits in progress:
    git archive HEAD src | tar -x -C /tmp/tree && PYTHONPATH=/tmp/tree/src .venv/bin/python benchmarks/bench_archives.py
(Spark's Python workers inherit PYTHONPATH; the JSON records which tidekeep package was measured.)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_logs  # the generator lives next to this script (sys.path above)

DAY_MS = 86_400_000
DATASET = "bench"
WARM_UP_DATASET = "warmup"
GREP_ENV = {**os.environ, "LC_ALL": "C"}


@dataclass(frozen=True)
class Query:
    name: str
    text: str  # tidekeep's query
    regex: bool
    ignore_case: bool
    grep: list[str]  # grep options and pattern with the same meaning on one line
    why: str
    day: int | None = None  # search one UTC day of the corpus (--begin/--end); grep gets that day's files


QUERIES = [
    Query("literal", "ConcurrentModificationException", False, False,
          ["-F", "ConcurrentModificationException"], "a rare exception inside Java stack traces"),
    Query("wildcard", '"POST /api/v1/payments/*/authorize HTTP/1.1" 5??', False, False,
          ["-E", r'"POST /api/v1/payments/.*/authorize HTTP/1\.1" 5..'], "failed payment authorisations (access log)"),
    Query("ignore-case", "failed password for invalid user", False, True,
          ["-i", "-F", "failed password for invalid user"], "ssh brute force (syslog), ~1 % of messages"),
    Query("regex", r'latency_ms":[0-9]{3,}', True, False,
          ["-E", r'latency_ms":[0-9]{3,}'], "slow orders, >= 100 ms (JSON lines), ~6 % of them"),
    Query("one day", "failed password for invalid user", False, True,
          ["-i", "-F", "failed password for invalid user"], "the ignore-case query over one day (the 3rd)", day=2),
]
# for --style hdfs; measured on a 30 MB corpus (seed 7): literal ~0.05 % of the messages, wildcard
# ~0.2 %, ignore-case ~1 %, regex ~4 %; every count equals grep's
HDFS_QUERIES = [
    Query("literal", "SocketTimeoutException", False, False, ["-F", "SocketTimeoutException"],
          "a rare exception, only in the datanodes' stack traces (on one of their lines, once per message)"),
    Query("wildcard", "cmd=delete\tsrc=/user/*/.staging/job_", False, False,
          ["-E", "cmd=delete\tsrc=/user/.*/\\.staging/job_"], "MapReduce staging files deleted (namenode audit log)"),
    Query("ignore-case", "slow blockreceiver write", False, True, ["-i", "-F", "slow blockreceiver write"],
          "slow datanode writes (to the mirror or the disk), ~1 % of messages"),
    Query("regex", r"duration\(ns\): [0-9]{10,}", True, False, ["-E", r"duration\(ns\): [0-9]{10,}"],
          "block transfers of a second or more (clienttrace), ~4 % of messages"),
    Query("one day", "slow blockreceiver write", False, True, ["-i", "-F", "slow blockreceiver write"],
          "the ignore-case query over one day (the 3rd)", day=2),
]
QUERIES_BY_STYLE = {"mixed": QUERIES, "hdfs": HDFS_QUERIES}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- the corpus ---------------------------------------------------------------------------------

def corpus_style(manifest: dict) -> str:
    return manifest.get("style", "mixed")  # manifests from before styles hold the mixed corpus


def prepare_corpus(directory: Path, size: int, seed: int, style: str | None) -> dict:
    manifest_path = directory / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        log(f"corpus: reusing {directory} ({manifest['raw_bytes'] / 1e6:,.1f} MB raw, seed {manifest['seed']}, "
            f"style {corpus_style(manifest)})")
        if style is not None and style != corpus_style(manifest):
            log(f"corpus: --style {style} ignored: the corpus holds the {corpus_style(manifest)} style")
        return manifest
    style = style or "mixed"
    log(f"corpus: generating {size / 1e6:,.0f} MB into {directory} (seed {seed}, style {style})")
    started = time.perf_counter()
    manifest = gen_logs.generate(directory, size, seed=seed, style=style)
    log(f"corpus: {manifest['raw_bytes'] / 1e6:,.1f} MB in {len(manifest['files'])} files, "
        f"{time.perf_counter() - started:.1f}s")
    return manifest


def plain_copies(corpus: Path, manifest: dict, scratch: Path) -> list[Path]:
    """The uncompressed form of every corpus file: the file itself, or a decompressed copy of a .gz."""
    plain = []
    for f in manifest["files"]:
        source = corpus / "logs" / f["path"]
        if not f["compressed"]:
            plain.append(source)
            continue
        target = scratch / "plain" / f["path"].removesuffix(".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(source, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 16 << 20)
        plain.append(target)
    return plain


def warm_page_cache(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


# ---- baselines ----------------------------------------------------------------------------------

@dataclass
class Compression:
    name: str
    seconds: float
    stored_bytes: int
    outputs: list[Path] = field(default_factory=list)


def compress_all(name: str, command: list[str], suffix: str, plain: list[Path], out_dir: Path) -> Compression:
    """Run the tool over every file, one after another, as a shell loop would."""
    outputs = [out_dir / f"{i:03d}-{p.name}{suffix}" for i, p in enumerate(plain)]
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for source, target in zip(plain, outputs, strict=True):
        with open(target, "wb") as out:
            subprocess.run([*command, str(source)], stdout=out, check=True)
    seconds = time.perf_counter() - started
    return Compression(name, seconds, sum(p.stat().st_size for p in outputs), outputs)


def grep_count(tool: str, query: Query, files: list[Path]) -> tuple[int, float]:
    """Total matching lines and wall seconds of `tool -c PATTERN FILES...`."""
    started = time.perf_counter()
    done = subprocess.run([tool, "-c", *query.grep, *map(str, files)], capture_output=True, text=True, env=GREP_ENV,
                          check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: no line matched
        raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}")
    total = 0
    for line in done.stdout.splitlines():
        total += int(line.rsplit(":", 1)[-1]) if len(files) > 1 else int(line)
    return total, seconds


# ---- tidekeep -----------------------------------------------------------------------------------

def tidekeep_client(home: Path, master: str, corpus_end_ms: int):
    import tidekeep as tk

    # the clock sits a day after the corpus: syslog lines (no year) get the corpus's year, and with
    # no retention configured nothing expires either way
    return tk.connect(home=home, settings={"spark.master": master}, clock=tk.ManualClock(corpus_end_ms + DAY_MS),
        create=True)


def tidekeep_ingest(client, corpus: Path) -> tuple[object, float]:
    started = time.perf_counter()
    report = client.archives.ingest(DATASET, [corpus / "logs"])
    return report, time.perf_counter() - started


def day_range(query: Query, start_ms: int) -> tuple[int | None, int | None]:
    if query.day is None:
        return None, None
    begin = start_ms + query.day * DAY_MS
    return begin, begin + DAY_MS - 1  # both ends inclusive


def tidekeep_search(client, query: Query, start_ms: int) -> tuple[int, float, str]:
    begin, end = day_range(query, start_ms)
    started = time.perf_counter()
    job = client.archives.search(DATASET, query.text, begin=begin, end=end, regex=query.regex,
                                 ignore_case=query.ignore_case)
    seconds = time.perf_counter() - started
    return job.results_count, seconds, str(job.state)


# ---- the run ------------------------------------------------------------------------------------

def best(runs: list[tuple[int, float]]) -> tuple[int, float]:
    return runs[0][0], min(seconds for _, seconds in runs)


def run(args: argparse.Namespace, corpus: Path, scratch: Path) -> dict:
    manifest = prepare_corpus(corpus, gen_logs.parse_size(args.size), args.seed, args.style)
    style = corpus_style(manifest)
    raw = manifest["raw_bytes"]
    log("baselines: plain copies of the rotated .gz files, page cache warm-up")
    plain = plain_copies(corpus, manifest, scratch)
    inputs = [corpus / "logs" / f["path"] for f in manifest["files"]]
    warm_page_cache(plain + inputs)
    results: dict = {"style": style, "raw_bytes": raw, "files": len(inputs), "messages": manifest["messages"],
                     "lines": manifest["lines"], "input_bytes_on_disk": manifest["stored_bytes"],
                     "spark_master": args.spark_master, "load_average": os.getloadavg()[0], "compress": [],
                     "search": []}

    compressions = []
    for name, command, suffix in (("gzip -6", ["gzip", "-6", "-c"], ".gz"), ("zstd -3", ["zstd", "-q", "-3", "-c"],
                                  ".zst"), ("zstd -3 -T2", ["zstd", "-q", "-3", "-T2", "-c"], ".t2.zst"),
                                  ("zstd -19", ["zstd", "-q", "-19", "-c"], ".19.zst")):
        c = compress_all(name, command, suffix, plain, scratch / name.replace(" ", ""))
        log(f"{name}: {c.seconds:.1f}s, {raw / 1e6 / c.seconds:.1f} MB/s, ratio {raw / c.stored_bytes:.2f}")
        compressions.append(c)
    gz_files, zst_files = compressions[0].outputs, compressions[1].outputs
    for c in compressions[2:]:
        for p in c.outputs:
            p.unlink()

    client = None
    if not args.no_tidekeep:
        import tidekeep

        results["tidekeep_package"] = str(Path(tidekeep.__file__).parent)  # which tree was measured
        log(f"tidekeep: {results['tidekeep_package']}")
        client = tidekeep_client(scratch / "workspace", args.spark_master, manifest["end_ms"])
        client.spark()  # the session starts before timing
        # and so do its Python workers, with the compiled kernels loaded (a fresh install compiles
        # them once, archives/compiled.py): a small ingest into a dataset of its own
        client.archives.ingest(WARM_UP_DATASET, [min(inputs, key=lambda p: p.stat().st_size)])
        log("tidekeep: ingesting")
        report, seconds = tidekeep_ingest(client, corpus)
        stored = sum(a.stored_bytes for a in report.archives)
        compressions.insert(0, Compression("tidekeep ingest", seconds, stored))
        results["ingest"] = {"seconds": seconds, "archives": len(report.archives), "stored_bytes": stored,
                             "messages": report.messages, "messages_without_timestamp":
                             report.messages_without_timestamp, "reported_raw_bytes": report.raw_bytes}
        log(f"tidekeep ingest: {seconds:.1f}s, {raw / 1e6 / seconds:.1f} MB/s, ratio {raw / stored:.2f}, "
            f"{len(report.archives)} archives, {report.messages:,} messages")
        check_ingest(report, manifest)
        compared = check_round_trip(client, report, corpus)
        results["ingest"]["messages_compared"] = compared
        log(f"round trip: {compared:,} messages read back byte for byte")
    for c in compressions:
        results["compress"].append({"name": c.name, "seconds": c.seconds, "mb_per_s": raw / 1e6 / c.seconds,
                                    "stored_bytes": c.stored_bytes, "ratio": raw / c.stored_bytes})

    for query in QUERIES_BY_STYLE[style]:
        begin, end = day_range(query, manifest["start_ms"])
        # a day's search: grep gets the files of that day (as one would pick them by name)
        chosen = [i for i, f in enumerate(manifest["files"])
                  if begin is None or (f["first_ts"] is not None and begin <= f["first_ts"] <= end)]
        scanned = sum(manifest["files"][i]["raw_bytes"] for i in chosen)
        row: dict = {"name": query.name, "query": query.text, "regex": query.regex, "ignore_case": query.ignore_case,
                     "grep": query.grep, "begin": begin, "end": end, "raw_bytes": scanned}
        for tool, files in (("grep", plain), ("zgrep", gz_files), ("zstdgrep", zst_files)):
            picked = [files[i] for i in chosen]
            count, seconds = best([grep_count(tool, query, picked) for _ in range(args.repeat)])
            row[tool] = {"count": count, "seconds": seconds, "mb_per_s": scanned / 1e6 / seconds}
        if client is not None:
            # one untimed run first: the first search of a session starts Spark's Python workers and
            # imports into them, which a running service has done long before
            tidekeep_search(client, query, manifest["start_ms"])
            runs = [tidekeep_search(client, query, manifest["start_ms"]) for _ in range(args.repeat)]
            states = {state for *_, state in runs}
            count, seconds = best([(n, s) for n, s, _ in runs])
            row["tidekeep"] = {"count": count, "seconds": seconds, "mb_per_s": scanned / 1e6 / seconds,
                               "states": sorted(states)}
            if states != {"SUCCEEDED"}:
                log(f"WARNING: search {query.name!r} ended {sorted(states)}")
            if count != row["zgrep"]["count"]:
                log(f"WARNING: search {query.name!r}: tidekeep found {count:,} messages, grep {row['zgrep']['count']:,}"
                    " lines; tidekeep counts a multi-line message once and grep counts each matching line, so a "
                    "query matching inside stack traces can differ — these queries were chosen not to")
        log(f"search {query.name}: " + ", ".join(f"{k} {row[k]['count']:,} in {row[k]['seconds']:.2f}s"
                                                 for k in ("tidekeep", "grep", "zgrep", "zstdgrep") if k in row))
        results["search"].append(row)
    if client is not None:
        client.close()
    return results


def check_ingest(report, manifest: dict) -> None:
    """The ingest must account for every byte and every timestamped message of the corpus."""
    no_ts = [f for f in manifest["files"] if f["form"] == "no timestamp"]
    timestamped = sum(f["messages"] for f in manifest["files"] if f["form"] != "no timestamp")
    no_ts_lines = sum(f["lines"] for f in no_ts)
    # a file without timestamps is kept apart: one block per file, or one message per line
    expected = (len(no_ts), no_ts_lines) if no_ts else (0,)
    problems = []
    if report.raw_bytes != manifest["raw_bytes"]:
        problems.append(f"raw bytes {report.raw_bytes:,} != corpus {manifest['raw_bytes']:,}")
    if report.messages - report.messages_without_timestamp != timestamped:
        problems.append(f"timestamped messages {report.messages - report.messages_without_timestamp:,} != corpus "
                        f"{timestamped:,}")
    if report.messages_without_timestamp not in expected:
        problems.append(f"messages without timestamp {report.messages_without_timestamp:,}: expected "
                        + (f"{len(no_ts)} block(s) or {no_ts_lines:,} lines" if no_ts else
                           "0 (every file of the corpus has timestamps)"))
    archived = sum(a.message_count for a in report.archives)
    if archived != report.messages:
        problems.append(f"archives hold {archived:,} messages, the report says {report.messages:,}")
    ends = [a.end_ts for a in report.archives if a.end_ts is not None]
    if ends and max(ends) != max(f["last_ts"] for f in manifest["files"] if f["last_ts"] is not None):
        problems.append(f"newest archive end {max(ends)} != newest log timestamp in the corpus")
    for problem in problems:
        log(f"WARNING: ingest: {problem}")


def check_round_trip(client, report, corpus: Path) -> int:
    """Every message of every file, read back from the archives (decoded from their format), must be
    the message the file holds, byte for byte, with its timestamp; returns how many were compared.
    Within a file the corpus's timestamps never go back, so a file's archived messages in timestamp
    order (ties in file order) are its messages in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        from tidekeep.archives.archive_format import read_messages as archived_messages
    except ImportError:  # a tree from before archive formats (--compare runs): every archive is text

        def archived_messages(parquet: pq.ParquetFile) -> pa.Table:
            return parquet.read()
    from tidekeep.archives.ingest import open_log
    from tidekeep.archives.messages import read_messages as file_messages
    from tidekeep.archives.timestamps import make_rules
    from tidekeep.store.inputs import list_inputs

    storage = client.workspace.storage
    tables = []
    for archive in report.archives:
        with storage.open_input(archive.path) as handle:
            tables.append(archived_messages(pq.ParquetFile(handle)))
    archived = pa.concat_tables(tables)
    rules = make_rules("UTC", None, client.clock.now_ms())
    compared = 0
    for file in list_inputs([str(corpus / "logs")]):
        with open_log(file) as stream:
            expected = pa.Table.from_batches(list(file_messages(stream, rules)))
        mine = archived.filter(pc.equal(archived.column("source"), file.name))
        mine = mine.take(pc.sort_indices(mine, sort_keys=[("timestamp", "ascending", "at_end")]))
        same = mine.num_rows == expected.num_rows and mine.column("message").equals(expected.column("message")) \
            and mine.column("timestamp").equals(expected.column("timestamp"))
        if not same:
            raise RuntimeError(f"round trip: the archived messages of {file.name} differ from the file's")
        compared += mine.num_rows
    if compared != archived.num_rows:
        raise RuntimeError(f"round trip: {archived.num_rows:,} messages archived, {compared:,} in the files")
    return compared


def print_table(results: dict, out) -> None:
    raw = results["raw_bytes"]
    print(f"log archives: {raw / 1e6:,.1f} MB raw logs ({results['style']}), {results['files']} files "
          f"({results['input_bytes_on_disk'] / 1e6:,.1f} MB on disk), {results['messages']:,} messages, "
          f"Spark {results['spark_master']}, load average {results['load_average']:.2f}", file=out)
    print(f"\n{'compress':<16} {'seconds':>8} {'MB/s':>8} {'ratio':>7}   {'tidekeep MB/s x':>15} "
          f"{'tidekeep ratio x':>16}", file=out)
    first = results["compress"][0]
    has_tk = first["name"] == "tidekeep ingest"
    for c in results["compress"]:
        rel = (f"{first['mb_per_s'] / c['mb_per_s']:>15.2f} {first['ratio'] / c['ratio']:>16.2f}"
               if has_tk else "")
        print(f"{c['name']:<16} {c['seconds']:>8.1f} {c['mb_per_s']:>8.1f} {c['ratio']:>7.2f}   {rel}", file=out)
    tools = (["tidekeep"] if has_tk else []) + ["zgrep", "zstdgrep", "grep"]
    header = f"\n{'search':<12} {'raw MB':>7} {'matches':>9}" + "".join(f" {t + ' s':>11} {'MB/s':>7}" for t in tools)
    if has_tk:
        header += f" {'x zgrep':>8} {'x zstdgrep':>10}"
    print(header, file=out)
    for s in results["search"]:
        line = f"{s['name']:<12} {s['raw_bytes'] / 1e6:>7,.0f} {s['zgrep']['count']:>9,}"
        line += "".join(f" {s[t]['seconds']:>11.2f} {s[t]['mb_per_s']:>7.1f}" for t in tools)
        if has_tk:
            line += f" {s['tidekeep']['mb_per_s'] / s['zgrep']['mb_per_s']:>8.2f}"
            line += f" {s['tidekeep']['mb_per_s'] / s['zstdgrep']['mb_per_s']:>10.2f}"
            if s["tidekeep"]["count"] != s["zgrep"]["count"]:
                line += f"  (tidekeep {s['tidekeep']['count']:,})"
        print(line, file=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1GB", help="corpus size when generating (default 1GB)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--style", choices=list(gen_logs.STYLES),
                        help="corpus style when generating (default mixed); a reused corpus keeps its own")
    parser.add_argument("--corpus", type=Path, help="corpus directory: reused if it holds one, else generated there")
    parser.add_argument("--keep", action="store_true", help="keep the generated corpus and the scratch directory")
    parser.add_argument("--repeat", type=int, default=2, help="search runs per query and tool (best is kept)")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--no-tidekeep", action="store_true", help="baselines only")
    parser.add_argument("--json", action="store_true", help="figures as JSON on stdout (the table goes to stderr)")
    args = parser.parse_args()
    for tool in ("gzip", "zstd", "grep", "zgrep", "zstdgrep"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed")
    scratch = Path(tempfile.mkdtemp(prefix="tidekeep-bench-archives-"))
    corpus = args.corpus or scratch / "corpus"
    try:
        results = run(args, corpus, scratch)
    finally:
        if args.keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=1))
        print_table(results, sys.stderr)
    else:
        print_table(results, sys.stdout)


if __name__ == "__main__":
    main()
