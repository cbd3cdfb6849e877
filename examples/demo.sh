#!/usr/bin/env bash
# A short guided tour of tidekeep streams on the embedded defaults (SQLite + a local directory),
# in a fresh temporary workspace. Run it with `make demo`; it needs no input and stops at the
# first failure. Set TIDEKEEP_DEMO_KEEP=1 to keep the workspace afterwards; `make demo-full`
# (TIDEKEEP_DEMO_FULL=1) adds the Spark Structured Streaming example, about a minute more.
# TIDEKEEP_DEMO_BIN names the directory holding `tidekeep` and `python` (default: .venv/bin).
#
# No step depends on how long the commands before it took: the machine may be loaded. Event and
# watermark times are explicit, retention records the tail at every cycle (retention.frequency=1ms),
# and the only wall-clock windows (the archives' ages, a writer's aggregation timeout) are minutes
# wide, against seconds of commands.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${TIDEKEEP_DEMO_BIN:-$ROOT/.venv/bin}"
KEEP="${TIDEKEEP_DEMO_KEEP:-0}"
FULL="${TIDEKEEP_DEMO_FULL:-0}"
TK="$BIN/tidekeep"
PY="$BIN/python"
STREAM="demo/sensors"

if [[ ! -x "$TK" ]]; then
    echo "demo: $TK not found; run 'make demo' (it creates .venv) or 'make install' first" >&2
    exit 1
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tidekeep-demo.XXXXXX")"
if [[ "$KEEP" == "1" ]]; then
    trap 'echo; echo "workspace kept at $WORK/workspace"' EXIT
else
    trap 'rm -rf "$WORK"' EXIT
fi
# only this demo's workspace counts: drop any TIDEKEEP_* settings from the caller's environment
while IFS= read -r name; do unset "$name"; done < <(env | sed -n 's/^\(TIDEKEEP_[A-Za-z0-9_]*\)=.*/\1/p')
export TIDEKEEP_HOME="$WORK/workspace"

if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
step() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"; }
tk() { printf '$ tidekeep %s\n' "$*"; "$TK" "$@"; }

echo "To run the commands below yourself, put tidekeep on your PATH and point it at a workspace:"
echo "    export PATH=\"$BIN:\$PATH\"    # or: source $ROOT/.venv/bin/activate"
echo "    export TIDEKEEP_HOME=/tmp/tk-tour  # then: tidekeep init"

# readings "sensor-K,<time>,<value>": eight sensors, the sensor name is the routing key (field 1)
generate() {
    local first="$1" count="$2"
    awk -v first="$first" -v count="$count" 'BEGIN {
        for (i = first; i < first + count; i++)
            printf "sensor-%d,2024-05-01T12:%02d:%02dZ,%.1f\n", i % 8, int(i / 60) % 60, i % 60, 20 + (i * 7 % 50) / 10
    }'
}

step "Create a workspace in $TIDEKEEP_HOME: tidekeep.yaml, a SQLite metadata store, a data directory"
tk init

step "Create the stream $STREAM with 2 segments; each owns half of the routing-key space"
tk stream create "$STREAM" --segments 2

step "Write 1000 sensor readings, one event per line, routed by the sensor name (field 1)"
generate 0 1000 > "$WORK/readings-1.csv"
head -n 3 "$WORK/readings-1.csv"
tk stream write "$STREAM" "$WORK/readings-1.csv" --key-field 1

step "Describe the stream: epochs, segments with key ranges and offsets (logical bytes), head and tail"
tk stream describe "$STREAM"

step "Remember the tail cut now: everything written so far lies before it"
FIRST_TAIL="$("$TK" stream tail "$STREAM")"
echo "tail cut: $FIRST_TAIL"

step "Split segment 0.1 in two (a scale: 0.1 is sealed and two successors take over its keys)"
tk stream split "$STREAM" 0.1 --parts 2

step "Write 500 more readings; keys of the sealed segment now land in its successors"
generate 1000 500 | tk stream write "$STREAM" --key-field 1

step "Read three events as JSON: payload, routing key, segment (epoch.number), offset, commit time"
tk stream read "$STREAM" --json --limit 3

step "Each sensor's readings come back in the order they were written, also across the split"
"$TK" stream read "$STREAM" | grep '^sensor-3,' > "$WORK/sensor-3.txt"
head -n 4 "$WORK/sensor-3.txt"

step "The head cut (first readable position) and the tail cut (where the next event goes)"
tk stream head "$STREAM"
tk stream tail "$STREAM"

step "Truncate at the tail cut remembered before the second write: the first 1000 readings go"
tk stream truncate "$STREAM" "$FIRST_TAIL" --reason "demo: drop the first batch"

step "Describe again: the head moved to that cut and the size shrank to the second batch"
tk stream describe "$STREAM"
REMAINING="$("$TK" stream read "$STREAM" | wc -l | tr -d ' ')"
echo "events left to read: $REMAINING (expected 500)"
[[ "$REMAINING" == "500" ]]

step "The audit trail records the truncation: old and new head, bytes freed, reason, actor"
tk audit list

step "Reading from before the new head is refused with a clear error (exit code 6)"
set +e
"$TK" stream read "$STREAM" --from "$STREAM:0.0=0,0.1=0" > /dev/null
CODE=$?
set -e
echo "exit code: $CODE"
[[ "$CODE" == "6" ]]

step "Spark batch read of the same stream: spark.read.format(\"tidekeep\") counts the events"
echo "(starting Spark; its own log goes to $WORK/spark.log and is shown only if this step fails)"
"$PY" - "$STREAM" 2> "$WORK/spark.log" <<'EOF' || { cat "$WORK/spark.log" >&2; exit 1; }
import sys

import tidekeep as tk

stream = sys.argv[1]
with tk.connect() as client:
    spark = client.spark()
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.format("tidekeep").options(**client.spark_options()).option("stream", stream).load()
    count, expected = frame.count(), sum(1 for _ in client.stream(stream).read())
    print(f"spark.read.format('tidekeep') on {stream}: {count} events (client.read: {expected})")
    assert count == expected, "Spark and client.read disagree"
    spark.stop()
EOF

step "Done: init, create, write, describe, split, read, head/tail, truncate, audit on embedded defaults"

# ---- issue 4: size retention and legal holds ------------------------------------------------------
# A retention cycle records the stream's tail at most once per retention.frequency (default 30 min);
# the demo sets it to 1 ms for its retention commands, so every cycle records one, however fast or
# slow the commands between them run.
RSTREAM="demo/metrics"
FAST=(--set retention.frequency=1ms)
size_of() { "$TK" stream describe "$1" --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["size_bytes"])'; }
write_round() { generate "$1" 400 | "$TK" stream write "$RSTREAM" --key-field 1 > /dev/null; }
cycle() { "$TK" "${FAST[@]}" retention run "$RSTREAM" --json > /dev/null; }

step "Size retention: a stream that keeps at least 20 KB and at most 40 KB"
tk stream create "$RSTREAM" --segments 2 --retention-size 20KB:40KB

step "Two rounds of 400 readings (16.8 KB a round), each followed by a retention cycle that records the tail"
for round in 0 1; do
    write_round $((round * 400))
    cycle
    echo "round $round: stream holds $(size_of "$RSTREAM") bytes"
done

step "A third round takes the stream past 40 KB; preview (a dry run) shows the cut a cycle would take"
write_round 800
tk "${FAST[@]}" retention preview "$RSTREAM"

step "Run the cycle: it truncates at that cut"
tk "${FAST[@]}" retention run "$RSTREAM"

step "One more round and cycle"
write_round 1200
cycle

step "History and audit: every truncation by retention, with its rule, bytes freed and new head"
tk retention history "$RSTREAM"
tk audit list --stream "$RSTREAM"

step "Describe: the size is within the policy's limits"
tk stream describe "$RSTREAM"
SIZE="$(size_of "$RSTREAM")"
echo "size: $SIZE bytes (policy: 20000 to 40000)"
(( SIZE >= 20000 && SIZE <= 40000 ))

step "A legal hold: retention cycles and manual truncation of a held stream truncate nothing (exit code 10)"
printf '$ tidekeep hold add stream %s --reason "demo: litigation hold" --json\n' "$RSTREAM"
HOLD_ID="$("$TK" hold add stream "$RSTREAM" --reason "demo: litigation hold" --json \
    | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
tk hold list
write_round 1600
set +e
tk "${FAST[@]}" retention run "$RSTREAM" > /dev/null
CYCLE_CODE=$?
tk stream truncate "$RSTREAM" tail
TRUNCATE_CODE=$?
set -e
echo "retention run: exit code $CYCLE_CODE; stream truncate: exit code $TRUNCATE_CODE (expected 10 and 10)"
[[ "$CYCLE_CODE" == "10" && "$TRUNCATE_CODE" == "10" ]]
SIZE="$(size_of "$RSTREAM")"
echo "size under the hold: $SIZE bytes (above the 40 KB maximum: nothing was truncated)"
(( SIZE > 40000 ))

step "Remove the hold: the next cycle truncates back within the limits"
tk hold remove "$HOLD_ID"
tk "${FAST[@]}" retention run "$RSTREAM"
SIZE="$(size_of "$RSTREAM")"
echo "size: $SIZE bytes (policy: 20000 to 40000)"
(( SIZE >= 20000 && SIZE <= 40000 ))
tk audit list --stream "$RSTREAM" --limit 3

step "Catalog (Stroom's model): 20,000 synthetic meta records over ten years, with a file each"
tk catalog generate --rows 20000 --seed 1 --with-files
cat > "$WORK/rules.yaml" <<'RULES'
rules:
  - {number: 1, name: Special data, expression: 'feed = "SPECIAL_DATA"', age: forever}
  - {number: 2, name: Internal errors, expression: 'feed = "INTERNAL_LOGS" and type = "Error"', age: 1 week}
  - {number: 3, name: Internal logs, expression: 'feed = "INTERNAL_LOGS"', age: 3 months}
  - {number: 4, name: App events, expression: 'feed = "APP_*_EVENTS"', age: 1 year}
  - {number: 5, name: Everything else, expression: all, age: 5 years}
RULES
cat "$WORK/rules.yaml"
tk catalog rules set "$WORK/rules.yaml"

step "Impact summary: what a run would delete now, per rule, feed and type (nothing is changed)"
tk catalog impact

step "A hold on records: security audit data is kept whatever the rules say"
tk hold add records 'feed = "SECURITY_AUDIT"' --reason "demo: audit of 2019"

step "The retention job on Spark: periods youngest first, logical deletes in batches (the impact above was its dry run)"
tk catalog run
DELETED_ID="$("$TK" catalog list --feed INTERNAL_LOGS --status DELETED --limit 1 --json \
    | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')"
HELD_ID="$("$TK" catalog list --feed SECURITY_AUDIT --limit 1 --json \
    | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')"

step "Explain: why a record was deleted, and why a held one was not"
tk catalog explain "$DELETED_ID"
tk catalog explain "$HELD_ID"

step "A second run right away is incremental (trackers) and finds nothing new"
tk catalog run

step "Purge: remove the data of records DELETED for longer than the purge age (0 s for the demo)"
BEFORE="$(find "$TIDEKEEP_HOME/data/catalog" -type f | wc -l)"
tk --set catalog.purge_age=0s catalog purge
AFTER="$(find "$TIDEKEEP_HOME/data/catalog" -type f | wc -l)"
echo "files before the purge: $BEFORE, after: $AFTER"
(( AFTER < BEFORE ))
tk catalog runs --limit 4

step "Archives (CLP's model): three small log sets, three hours old or ten minutes old, in two zones"
mkdir -p "$WORK/logs/shop" "$WORK/logs/web" "$WORK/logs/audit"
"$PY" - "$WORK/logs" <<'LOGS'
import gzip, sys, time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo
out, now = sys.argv[1], datetime.now(timezone.utc)
ny = lambda t: t.astimezone(ZoneInfo("America/New_York")).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
old = now - timedelta(hours=3)
with open(f"{out}/shop/app.log", "w") as f:  # local New York times, no zone: read with --timezone
    f.write(f"{ny(old)} INFO  [main] checkout service started\n")
    f.write(f"{ny(old + timedelta(seconds=5))} ERROR [worker-3] payment 8812 failed\n")
    f.write("java.lang.IllegalStateException: card declined\n\tat com.shop.Pay.charge(Pay.java:41)\n")
    f.write(f"{ny(old + timedelta(seconds=9))} INFO  [worker-1] payment 8813 ok\n")
with gzip.open(f"{out}/web/access.log.1.gz", "wt") as f:  # ISO-8601 UTC, rotated and gzipped
    for i in range(200):
        t = (now - timedelta(minutes=10, seconds=-i)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        f.write(f"{t} GET /api/orders/{i} {404 if i % 50 == 7 else 200} {i % 13}ms\n")
with open(f"{out}/audit/audit.log", "w") as f:
    f.write(f"{int(old.timestamp() * 1000)} {{\"user\": \"alice\", \"action\": \"export\"}}\n")
LOGS
tk archives ingest shop "$WORK/logs/shop" --timezone America/New_York
tk archives ingest web "$WORK/logs/web"
tk archives ingest audit "$WORK/logs/audit"
tk archives list

step "Search: CLP wildcards (implicit substring); a stack trace is part of its message"
tk archives search shop 'payment * failed'
echo '$ tidekeep archives search web "GET /api/orders/* 404" --json'
"$TK" archives search web "GET /api/orders/* 404" --json \
    | "$PY" -c 'import json, sys; d = json.load(sys.stdin); print("job", d["job"]["id"], d["job"]["state"], d["job"]["results_count"], "results")'
tk archives jobs

step "Retention of 60 minutes: a dry run says what would expire and why; a hold keeps the audit dataset"
tk hold add dataset audit --reason "demo: audit export under review"
tk --set archive_output.retention_period=60 archives gc --dry-run

step "Run the collectors: the shop archive goes (metadata, catalog record, file); held and recent ones stay"
tk --set archive_output.retention_period=60 archives gc
tk archives list
LEFT="$("$TK" archives list --json | "$PY" -c 'import json, sys; print(" ".join(sorted(a["dataset"] for a in json.load(sys.stdin))))')"
echo "datasets with archives left: $LEFT (expected: audit web)"
[[ "$LEFT" == "audit web" ]]
tk audit list --limit 3

# ---- issue 7: consumption-based retention ------------------------------------------------------------
# Two subscriber reader groups consume demo/orders at different speeds; retention truncates only what
# both have acknowledged (their checkpoints), except that the maximum bounds what a laggard can hold.
QSTREAM="demo/orders"
AUTO="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"
queue_round() { generate "$1" 400 | "$TK" stream write "$QSTREAM" --key-field 1 > /dev/null; }
# one retention cycle; prints its decision as "case rule freed" and keeps the JSON in $WORK/cycle.json
queue_cycle() {
    "$TK" "${FAST[@]}" retention run "$QSTREAM" --json > "$WORK/cycle.json"
    "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["case"], d["rule"], d["freed_bytes"])' \
        "$WORK/cycle.json"
}
# the effective cut (acknowledged, else start) of GROUP as the last cycle saw it, in compact form
cycle_view() {
    "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(next(",".join(f"{k}={v}" for k, v in s["positions"].items()) for s in d["subscribers"] if s["reader_group"] == sys.argv[2]))' \
        "$WORK/cycle.json" "$1"
}
cycle_cut() { "$PY" -c 'import json, sys; c = json.load(open(sys.argv[1]))["cut"]; print(",".join(f"{k}={v}" for k, v in (c or {}).items()) or "none")' "$WORK/cycle.json"; }

step "Consumption-based retention: demo/orders keeps at most 40 KB and no minimum (a message queue)"
tk stream create "$QSTREAM" --segments 2 --retention-size 0:40KB

step "Two subscriber groups: billing and analytics release data at their last checkpoint"
tk rg create billing --stream "$QSTREAM" --retention-type "$AUTO"
tk rg create analytics --stream "$QSTREAM" --retention-type "$AUTO"

step "Write 400 orders (16.8 KB); nobody has acknowledged anything, so a cycle truncates nothing"
queue_round 0
queue_cycle
tk retention subscribers "$QSTREAM"
[[ "$(cycle_cut)" == "none" ]]

step "billing reads all 400 and checkpoints; analytics, slower, reads 100 and checkpoints"
"$TK" rg read billing --reader b1 --limit 400 > /dev/null
tk rg checkpoint billing billing-1
"$TK" rg read analytics --reader a1 --limit 100 > /dev/null
tk rg checkpoint analytics analytics-1
tk retention subscribers "$QSTREAM"

step "Preview: the lower bound is analytics' acknowledged cut; case (i) truncates exactly there"
tk "${FAST[@]}" retention preview "$QSTREAM"
echo "cycle: $(queue_cycle)"
SLOW_CUT="$(cycle_view analytics)"
echo "truncated at $(cycle_cut); analytics acknowledged $SLOW_CUT"
[[ "$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["case"])' "$WORK/cycle.json")" == "i" ]]
[[ "$(cycle_cut)" == "$SLOW_CUT" ]]

step "analytics stops reading; billing keeps up with three more rounds: the data analytics has not read stays until the stream passes 40 KB, then the maximum wins"
for round in 1 2 3; do
    queue_round $((round * 400))
    "$TK" rg read billing --reader b1 --limit 400 > /dev/null
    "$TK" rg checkpoint billing "billing-$((round + 1))" > /dev/null
    echo "round $round: cycle $(queue_cycle); stream holds $(size_of "$QSTREAM") bytes"
done
CASE="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["case"])' "$WORK/cycle.json")"
SIZE="$(size_of "$QSTREAM")"
echo "last case: ($CASE); size $SIZE bytes (maximum 40000)"
[[ "$CASE" == "iii" || "$CASE" == "v" ]]
(( SIZE <= 40000 ))

step "History: consumption truncations name their case and the subscribers that allowed them"
tk retention history "$QSTREAM"

step "analytics is deleted: it no longer holds anything, and the next cycle follows billing to the tail"
tk rg delete analytics
echo "cycle: $(queue_cycle)"
SIZE="$(size_of "$QSTREAM")"
echo "size: $SIZE bytes (billing has read everything)"
(( SIZE == 0 ))


# ---- issue 8: watermarks -------------------------------------------------------------------------------
# Two gateways write clicks and note the event time they have reached; the controller folds the notes into
# watermarks (what `tidekeep serve` does every second); a reader learns the window of time it is reading.
# The times are the gateways' own (explicit), and the aggregation timeout is 10 minutes: no step depends on
# how long the commands between a note and a computation take (a 10 s timeout and a 10 s sleep did: three
# slow commands timed gw-2 out before the step that shows it holding watermarks back).
WSTREAM="demo/clicks"
T0=1714564800000   # 2024-05-01T12:00:00Z, the gateways' event time
clicks() { generate "$1" 100 | "$TK" stream write "$WSTREAM" --key-field 1 --writer-id "$2" > /dev/null; }
# one round: each gateway writes 100 clicks and notes its time (gw-1 "$2", gw-2 "$3"), then a watermark
gateways_round() {
    clicks "$1" gw-1
    clicks $(($1 + 100)) gw-2
    tk watermark note "$WSTREAM" "$2" --writer gw-1
    tk watermark note "$WSTREAM" "$3" --writer gw-2
    tk watermark compute "$WSTREAM"
}
wm_count() { "$TK" watermark list "$WSTREAM" --all --json | "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)))'; }

step "Watermarks: demo/clicks, 2 segments; a gateway that stops noting is waited for at most 10 minutes"
tk stream create "$WSTREAM" --segments 2 --timestamp-aggregation-timeout 10m

step "gw-1 and gw-2 write 100 clicks each, then note the event time they have reached"
gateways_round 0 $((T0 + 60000)) $((T0 + 61000))

step "A second round: the watermark's lower time is the slower gateway's, its cut is past both"
gateways_round 200 $((T0 + 125000)) $((T0 + 120000))

step "gw-2 goes quiet; gw-1 notes on: no watermark while gw-2 may still write events older than gw-1's"
clicks 400 gw-1
tk watermark note "$WSTREAM" $((T0 + 180000)) --writer gw-1
tk watermark compute "$WSTREAM"
tk watermark writers "$WSTREAM"
[[ "$(wm_count)" == "2" ]]
"$TK" watermark writers "$WSTREAM" --json | "$PY" -c 'import json, sys
states = {w["writer_id"]: w["state"] for w in json.load(sys.stdin)}
assert states["gw-2"].startswith("lagging"), states'

step "gw-2 writes its last 100 clicks and notes the time it has reached: the watermark moves up to gw-1's time; a gateway that stops noting altogether stops holding watermarks back after the 10-minute timeout"
clicks 500 gw-2
tk watermark note "$WSTREAM" $((T0 + 185000)) --writer gw-2
tk watermark compute "$WSTREAM"
tk watermark list "$WSTREAM"
[[ "$(wm_count)" == "3" ]]

step "A reader group reads the first 200 clicks, then the rest: its time window moves forward with it"
tk rg create dashboards --stream "$WSTREAM"
"$TK" rg read dashboards --reader d1 --limit 200 --time-window | tail -n 1
"$TK" rg read dashboards --reader d1 --time-window | tail -n 1


# ---- issue 9: Spark Structured Streaming (make demo-full) ----------------------------------------------
if [[ "$FULL" == "1" ]]; then
    step "Spark Structured Streaming: a query reads sensor events as a subscriber, aggregates per event-time minute into another stream, and retention deletes the input as the query commits (examples/spark_streaming_retention.py)"
    "$PY" "$ROOT/examples/spark_streaming_retention.py" --home "$WORK/spark-example"
    step "Done: streams, size retention, legal holds, the catalog's retention job and purge, log archives, consumption-based retention, watermarks and Spark Structured Streaming, on embedded defaults"
else
    step "Done: streams, size retention, legal holds, the catalog's retention job and purge, log archives, consumption-based retention and watermarks, on embedded defaults; 'make demo-full' adds Spark Structured Streaming (about a minute more)"
fi
