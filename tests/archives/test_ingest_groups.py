"""Ingest in one pass (archives/ingest_groups.py): the files, ordered by time, are cut into runs
of about equal bytes, one per task; a real ingest reads every file once, in one task, and gives
every message exactly once."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import archive_rows
from tidekeep.archives.archive_writer import IngestAbandoned
from tidekeep.archives.ingest import LIVE_MARKER, SAMPLE_BYTES, survey_input, write_files
from tidekeep.archives.ingest_groups import FileSpan, file_groups, task_count, time_order
from tidekeep.archives.timestamps import make_rules
from tidekeep.store.fileio import FileIO
from tidekeep.store.inputs import InputFile, InputOpener, list_inputs

spans = st.builds(FileSpan, st.integers(0, 10_000), st.one_of(st.none(), st.integers(0, 2_000)),
                  st.sampled_from("ab"))


@given(st.lists(spans, min_size=1, max_size=12))
def test_the_time_order_is_the_brute_force_sort(files: list[FileSpan]) -> None:
    def key(index: int) -> tuple[int, int, str, int]:
        first = files[index].first_ts
        return (0, 0, files[index].directory, index) if first is None else (1, first, files[index].directory, index)

    assert time_order(files) == sorted(range(len(files)), key=key)


@given(st.lists(spans, min_size=1, max_size=12), st.integers(1, 8))
def test_the_groups_cut_the_time_order_into_near_equal_runs(files: list[FileSpan], tasks: int) -> None:
    groups = file_groups(files, tasks)
    assert len(groups) == min(tasks, len(files)) and all(groups)
    assert [index for group in groups for index in group] == time_order(files)  # every file once, in order
    sizes = [sum(files[i].raw_bytes for i in group) for group in groups]
    biggest_file = max(f.raw_bytes for f in files)
    # no run is bigger than an equal share by more than its files' sizes allow
    assert max(sizes) <= sum(sizes) / len(groups) + biggest_file


@pytest.mark.parametrize("files, tasks, expected", [
    ([10] * 8, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),
    ([10] * 7, 2, [[0, 1, 2, 3], [4, 5, 6]]),
    ([100, 1, 1, 1, 1], 2, [[0], [1, 2, 3, 4]]),
    ([1, 1, 1, 1, 100], 2, [[0, 1, 2, 3], [4]]),
    ([5, 5], 3, [[0], [1]]),
])
def test_equal_files_make_equal_runs(files: list[int], tasks: int, expected: list[list[int]]) -> None:
    spans = [FileSpan(size, index, "d") for index, size in enumerate(files)]
    assert file_groups(spans, tasks) == expected


def test_task_count_follows_input_size_target_and_parallelism() -> None:
    assert task_count(0, 256_000_000, 8) == 1
    assert task_count(1000, 256_000_000, 8) == 1
    assert task_count(80_000_000, 1_000_000, 2) == 10  # 80 MB of text stores ~10 MB: ten 1 MB archives
    assert task_count(1 << 30, 256_000_000, 2) == 2  # big input: every core writes
    assert task_count(1 << 30, 256_000_000, 1) == 1


def test_an_ingest_reads_every_file_once_in_one_stage(tmp_path: Path, spark) -> None:
    client = tk.connect(home=tmp_path / "ws", settings={"archives.target_size": 4000}, create=True)
    try:
        base = int(dt.datetime(2024, 7, 1, tzinfo=dt.UTC).timestamp() * 1000)
        files = []
        for name in ("a", "b", "c"):
            lines = [f"{dt.datetime.fromtimestamp((base + i * 1000) / 1000, dt.UTC).isoformat()} {name}-{i} x={i}"
                     for i in range(3000)]
            path = tmp_path / "logs" / f"{name}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            files.append(path)
        report = client.archives.ingest("web", [tmp_path / "logs"])
        tracker = spark.sparkContext.statusTracker()
        jobs = tracker.getJobIdsForGroup(f"tidekeep-ingest-_ingest-{report.ingest_id}")
        stages = [tracker.getStageInfo(s) for j in jobs for s in tracker.getJobInfo(j).stageIds]
        # one stage, one task per group of files (three files, three groups here): no shuffle
        assert [stage.numCompletedTasks for stage in stages] == [len(files)]
        rows = [r for a in report.archives for r in archive_rows(client, a)]
        assert sorted((r["timestamp"], r["message"]) for r in rows) == sorted(
            (base + i * 1000, line) for path in files
            for i, line in enumerate(path.read_text().splitlines()))
        sources = {}
        for archive in report.archives:
            archive_rows_ = archive_rows(client, archive)
            stamps = [r["timestamp"] for r in archive_rows_]
            assert min(stamps) == archive.begin_ts and max(stamps) == archive.end_ts
            sources[archive.id] = {r["source"] for r in archive_rows_}
        assert all(len(names) == 1 for names in sources.values())  # each task wrote one file's archives
    finally:
        client.close()


class CountingOpener(InputOpener):
    """The real opener, counting the files it opens (the driver's survey is meant to open each once)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    def stream(self, file: InputFile) -> Any:
        self.opened.append(file.name)
        return super().stream(file)

    def random_access(self, file: InputFile) -> Any:
        self.opened.append(file.name)
        return super().random_access(file)


def stamped_lines(base_ms: int, count: int, step_ms: int) -> list[tuple[int, str]]:
    return [(base_ms + i * step_ms,
             f"{dt.datetime.fromtimestamp((base_ms + i * step_ms) / 1000, dt.UTC).isoformat(timespec='milliseconds')}"
             f" req={i} path=/api/{i % 7}") for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, 40, 5_000])
@pytest.mark.parametrize("compressed", [False, True])
def test_the_survey_opens_each_file_once_and_finds_its_span_and_size(tmp_path: Path, count: int,
                                                                     compressed: bool) -> None:
    base = int(dt.datetime(2024, 7, 1, tzinfo=dt.UTC).timestamp() * 1000)
    lines = stamped_lines(base, count, 1500)
    text = "".join(f"{line}\n" for _, line in lines).encode()
    path = tmp_path / ("app.log.gz" if compressed else "app.log")
    path.write_bytes(gzip.compress(text, mtime=0) if compressed else text)
    [file] = list_inputs([str(path)])
    opener = CountingOpener()
    survey = survey_input(file, opener, make_rules("UTC", None), "logs")
    assert opener.opened == [file.name]
    size = path.stat().st_size
    assert survey.raw_bytes == (max(len(text), 3 * size) if compressed else size)
    first = lines[0][0] if lines else None
    assert survey.span == FileSpan(survey.raw_bytes, first, "logs")
    if count == 5_000:
        assert len(text) > 2 * SAMPLE_BYTES  # only the head is read


def test_a_file_that_cannot_be_gunzipped_goes_without_a_span(tmp_path: Path) -> None:
    path = tmp_path / "broken.log.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    [file] = list_inputs([str(path)])
    survey = survey_input(file, CountingOpener(), make_rules("UTC", None), "logs")
    assert survey.span.first_ts is None


class DriverGivesUp(FileIO):
    """A real FileIO on which the driver's failure cleanup happens while a task writes: the staging
    directory's marker is taken away as soon as the task's first archive file is finished."""

    def __init__(self, uri: str, marker: str) -> None:
        super().__init__(uri)
        self.marker = marker

    def finish(self, sink: Any, key: str) -> None:
        super().finish(sink, key)
        if key.endswith(".parquet") and self.exists(self.marker):
            self.discard([self.marker])


def many_lines(tmp_path: Path) -> InputFile:
    base = int(dt.datetime(2024, 7, 1, tzinfo=dt.UTC).timestamp() * 1000)
    path = tmp_path / "app.log"
    path.write_text("".join(f"{line}\n" for _, line in stamped_lines(base, 20_000, 50)))
    [file] = list_inputs([str(path)])
    return file


def test_a_task_whose_ingest_failed_elsewhere_stops_and_leaves_nothing(tmp_path: Path) -> None:
    staging = "archives/app/_ingest-x"
    storage = DriverGivesUp(str(tmp_path / "data"), f"{staging}/{LIVE_MARKER}")
    storage.write(f"{staging}/{LIVE_MARKER}", b"")
    with pytest.raises(IngestAbandoned):
        write_files([many_lines(tmp_path)], make_rules("UTC", None), 64 << 10, storage, staging, 2_000, "UTC")
    assert not (tmp_path / "data" / staging).exists()  # its archives and the directory are gone


def test_a_task_that_starts_after_its_ingest_failed_writes_nothing(tmp_path: Path) -> None:
    """Its Python worker started late: the driver had already taken the marker and the directory away."""
    staging = "archives/app/_ingest-x"
    storage = FileIO(str(tmp_path / "data"))
    with pytest.raises(IngestAbandoned, match="no longer wanted"):
        write_files([many_lines(tmp_path)], make_rules("UTC", None), 64 << 10, storage, staging, 2_000, "UTC")
    assert not (tmp_path / "data" / "archives").exists() or not list((tmp_path / "data" / "archives").rglob("*.*"))


def test_a_task_writes_every_message_while_its_ingest_is_wanted(tmp_path: Path) -> None:
    staging = "archives/app/_ingest-x"
    storage = FileIO(str(tmp_path / "data"))
    storage.write(f"{staging}/{LIVE_MARKER}", b"")
    written = write_files([many_lines(tmp_path)], make_rules("UTC", None), 64 << 10, storage, staging, 2_000, "UTC")
    assert len(written) > 1 and sum(a.message_count for a in written) == 20_000
    assert all(storage.exists(a.file) for a in written)
