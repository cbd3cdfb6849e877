"""The archives benchmark's corpus generator (benchmarks/gen_logs.py): deterministic for a seed,
every timestamp form present and well-formed, sizes as asked, the manifest true to the files."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gen_logs.py"
SIZE = 600_000


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_logs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_logs"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gen_logs = load_generator()


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def text_of(root: Path, rel: str) -> str:
    data = (root / rel).read_bytes()
    return (gzip.decompress(data) if rel.endswith(".gz") else data).decode("ascii")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("corpus")
    return out, gen_logs.generate(out, SIZE, seed=7, days=3)


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(corpus, tmp_path):
    out, _ = corpus
    gen_logs.generate(tmp_path / "again", SIZE, seed=7, days=3)
    gen_logs.generate(tmp_path / "other", SIZE, seed=8, days=3)
    first = digests(out)
    assert digests(tmp_path / "again") == first
    other = digests(tmp_path / "other")
    assert other.keys() == first.keys()
    assert all(other[name] != first[name] for name in first)


def test_sizes_and_manifest_match_the_files(corpus):
    out, manifest = corpus
    root = out / "logs"
    listed = {f["path"] for f in manifest["files"]}
    assert listed == {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    raw_total = 0
    for f in manifest["files"]:
        text = text_of(root, f["path"])
        assert len(text) == f["raw_bytes"]
        assert (root / f["path"]).stat().st_size == f["stored_bytes"]
        assert text.count("\n") == f["lines"] and text.endswith("\n")
        raw_total += len(text)
    assert raw_total == manifest["raw_bytes"]
    # each service stops at the first line past its share: the total is the asked size plus < one line each
    assert SIZE <= raw_total < SIZE + 6 * 2000
    assert json.loads((out / "manifest.json").read_text()) == manifest


def test_rotated_days_are_gzip_and_the_last_day_is_plain(corpus):
    _, manifest = corpus
    by_service: dict[str, list[dict]] = {}
    for f in manifest["files"]:
        by_service.setdefault(f["service"], []).append(f)
    assert set(by_service) == {"gateway", "payments", "auth", "orders", "worker", "edge", "backup"}
    for service in ("gateway", "auth"):
        files = by_service[service]
        assert len(files) == 3
        assert [f["compressed"] for f in files] == [True, True, False]
        assert files[0]["path"].endswith(".gz") and files[0]["stored_bytes"] < files[0]["raw_bytes"] / 2
    assert not any(f["compressed"] for f in by_service["payments"] + by_service["orders"])


FORMS = {
    "gateway": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z gw-\d "),
    "payments": re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO |WARN |DEBUG|ERROR) "
                           r"\[http-nio-8443-exec-\d+\] "),
    "auth": re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d auth-\d\d [\w-]+\[\d+\]: "),
    "orders": re.compile(r"\d{13} \{\"level\":"),
    "worker": re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[(INFO|WARNING|ERROR)\] celery\."),
    "edge": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+02:00 level="),
}


def line_time_ms(service: str, line: str, year: int) -> int:
    if service == "orders":
        return int(line[:13])
    if service == "auth":
        return int(datetime.strptime(f"{year} {line[:15]}", "%Y %b %d %H:%M:%S").replace(tzinfo=UTC).timestamp() * 1000)
    head = line.split(" ")[0] if service in ("gateway", "edge") else line[:23].replace(",", ".")
    return int(datetime.fromisoformat(head.replace("Z", "+00:00")).astimezone(UTC).timestamp() * 1000)


def test_every_message_starts_with_its_services_timestamp_form_and_time_never_goes_back(corpus):
    out, manifest = corpus
    root = out / "logs"
    start, end = manifest["start_ms"], manifest["end_ms"]
    multi_line = {"payments": 0, "worker": 0}
    for f in manifest["files"]:
        service = f["service"]
        if service == "backup":
            continue
        lines = text_of(root, f["path"]).splitlines()
        heads = [line for line in lines if FORMS[service].match(line)]
        continuation = [line for line in lines if not FORMS[service].match(line)]
        assert len(heads) == f["messages"]
        assert FORMS[service].match(lines[0])
        if service in multi_line:
            multi_line[service] += len(continuation)
            # a continuation line never looks like a timestamp the ingest would recognise
            assert not any(re.match(r"\d|[A-Z][a-z]{2} [ \d]\d \d\d:", line) for line in continuation)
        else:
            assert continuation == []
        times = [line_time_ms(service, line, 2024) for line in heads]
        assert times == sorted(times)
        assert times[0] == f["first_ts"] and times[-1] == f["last_ts"]
        assert start <= times[0] and times[-1] < end
        # the file holds one UTC day
        assert (times[0] - start) // 86_400_000 == (times[-1] - start) // 86_400_000
    assert multi_line["payments"] > 0 and multi_line["worker"] > 0, "stack traces and tracebacks are present"


def test_the_backup_file_has_no_timestamps(corpus):
    out, manifest = corpus
    [backup] = [f for f in manifest["files"] if f["service"] == "backup"]
    lines = text_of(out / "logs", backup["path"]).splitlines()
    assert lines[0] == "sending incremental file list" and len(lines) == backup["lines"] > 10
    assert not any(pattern.match(line) for line in lines for pattern in FORMS.values())


def test_compresses_like_logs_neither_trivially_nor_like_noise(corpus):
    out, manifest = corpus
    import zlib

    raw = "".join(text_of(out / "logs", f["path"]) for f in manifest["files"]).encode()
    ratio = len(raw) / len(zlib.compress(raw, 6))
    assert 3 < ratio < 20, ratio


def test_command_line_writes_the_corpus_and_rejects_bad_input(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "c"), "--size", "200KB", "--seed", "3",
                           "--days", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["days"] == 2 and manifest["raw_bytes"] >= 200_000
    again = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "c"), "--size", "200KB"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "is not empty" in again.stderr
    bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "d"), "--size", "lots"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--size 'lots'" in bad.stderr
    assert not (tmp_path / "d").exists()


def test_parse_size():
    assert gen_logs.parse_size("1GB") == 10**9
    assert gen_logs.parse_size("50MiB") == 50 * 2**20
    assert gen_logs.parse_size("1.5kb") == 1500
    assert gen_logs.parse_size("12345") == 12345
    with pytest.raises(ValueError):
        gen_logs.parse_size("GB")
