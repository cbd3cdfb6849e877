"""Regexes in Spark: the RE2 path the catalog compiler uses (an Arrow UDF on
pyarrow.compute.match_substring_regex) against Spark's own rlike (Java regex), on the same data.

    .venv/bin/python benchmarks/bench_regex.py [--rows N] [--repeat R] [--spark-master M]

N rows (default 2,000,000) of record-like text (`APP_17_EVENTS/host-42.example.com/1234567`) are
generated and cached in Spark; for each pattern, `df.filter(<term>).count()` with
`to_spark(attr matches P)` (RE2) and with `rlike` of the same translation (the compiler before
RE2: the translation is valid Java regex with the same meaning) must count the same rows; best of
R. Then one value of n `a`s under `(.*a){4}b`: rlike's time grows as n^4 (Java's regex memoizes
some nested loops, such as `(a+)+$`, but not `.*` runs; a LIKE with several `%`s is the same
kind of regex), RE2's stays flat. Timing never fails anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from pyspark.sql import functions as F

from tidekeep.catalog.expressions import CompileContext, Condition, Term, to_spark
from tidekeep.catalog.expressions.regex import parse_regex
from tidekeep.spark.session import build_spark

PATTERNS = [
    "^APP_1[0-9]_EVENTS",  # anchored prefix
    "host-(1|2)[0-9]\\.example",  # alternation in the middle
    "[0-9]{7}$",  # anchored at the end
    "(a|e)x(a|e)mple\\.com/12",  # few matches
]
CONTEXT = CompileContext(0, {})


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def best(repeat: int, run) -> tuple[float, int]:
    times, result = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args()
    log(f"load average: {os.getloadavg()}")
    spark = build_spark(args.spark_master, "tidekeep-bench-regex")
    frame = spark.range(args.rows).select(
        F.to_json(F.create_map(F.lit("v"), F.format_string("APP_%d_EVENTS/host-%d.example.com/%d", F.col("id") % 500,
                                                           F.col("id") % 97, F.col("id") * 7919))).alias("attributes")
    ).cache()
    frame.count()
    print(f"{args.rows:,} rows, best of {args.repeat}")
    print(f"{'pattern':32} {'matches':>9} {'rlike s':>9} {'RE2 UDF s':>10} {'ratio':>7}")
    value = F.from_json("attributes", "map<string,string>").getItem("v")
    for pattern in PATTERNS:
        translated = parse_regex(pattern).re2
        rlike_s, rlike_n = best(args.repeat, lambda t=translated: frame.filter(value.rlike(t)).count())
        term = to_spark(Term("attr.v", Condition.MATCHES_REGEX, pattern), CONTEXT)
        re2_s, re2_n = best(args.repeat, lambda c=term: frame.filter(c).count())
        assert rlike_n == re2_n, (pattern, rlike_n, re2_n)
        print(f"{pattern:32} {re2_n:>9,} {rlike_s:>9.2f} {re2_s:>10.2f} {re2_s / rlike_s:>7.2f}")

    print("\n(.*a){4}b over one value of n 'a's")
    print(f"{'n':>5} {'rlike s':>9} {'RE2 UDF s':>10}")
    trap = "(.*a){4}b"
    term = to_spark(Term("attr.v", Condition.MATCHES_REGEX, trap), CONTEXT)
    for n in (100, 200):  # 400 did not finish within 8 minutes on rlike
        one = spark.createDataFrame([("a" * n,)], "v string").cache()
        one.count()
        rlike_s, _ = best(1, lambda o=one: o.filter(F.col("v").rlike(parse_regex(trap).re2)).count())
        wrapped = one.select(F.to_json(F.create_map(F.lit("v"), F.col("v"))).alias("attributes"))
        re2_s, _ = best(1, lambda w=wrapped: w.filter(term).count())
        print(f"{n:>5} {rlike_s:>9.2f} {re2_s:>10.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
