"""The pure pieces of the stream page: the retained-size series (web/retained_series.py) and the
geometry of the epochs-and-segments diagram (web/stream_diagram.py)."""

from __future__ import annotations

from tidekeep.streams.model import Segment, segment_id
from tidekeep.streams.retention import RetentionRecord
from tidekeep.web.retained_series import chart_spec, retained_series
from tidekeep.web.stream_diagram import GAP, stream_diagram


def record(time_ms: int, size: int) -> RetentionRecord:
    return RetentionRecord(time_ms, size, {0: size})


def test_retained_is_written_less_truncated_at_each_moment() -> None:
    records = [record(10, 1000), record(20, 2000), record(30, 2500)]
    truncations = [{"id": 5, "time_ms": 25, "bytes_freed": 1500}]
    points = retained_series(records, truncations, written_now=2600, truncated_now=1500, now_ms=40, created_ms=0,
                             complete=True)
    assert [(p.time_ms, p.written, p.retained, p.event) for p in points] == [
        (0, 0, 0, "created"), (10, 1000, 1000, "recorded"), (20, 2000, 2000, "recorded"),
        (25, 2000, 500, "truncated"), (30, 2500, 1000, "recorded"), (40, 2600, 1100, "now")]
    spec = chart_spec(points, str)
    assert spec["labels"] == ["0", "10", "20", "25", "30", "40"] and spec["bytes"] is True
    assert spec["datasets"][0]["data"] == [0, 1000, 2000, 500, 1000, 1100]


def test_with_older_truncations_left_out_the_series_starts_at_the_oldest_given() -> None:
    # 2,500 bytes were truncated before the window: a record before it would show a false size
    points = retained_series([record(10, 3000), record(30, 4500)], [{"time_ms": 25, "bytes_freed": 1500}],
                             written_now=4600, truncated_now=4000, now_ms=40, created_ms=0, complete=False)
    assert [(p.time_ms, p.retained, p.event) for p in points] == [(25, 0, "truncated"), (30, 500, "recorded"),
                                                                  (40, 600, "now")]


def test_the_diagram_draws_a_split_as_links_from_the_sealed_segment() -> None:
    segments = [Segment(segment_id(0, 0), 0.0, 0.5, 0, 100, True, 1), Segment(segment_id(0, 1), 0.5, 1.0, 0, 80),
                Segment(segment_id(1, 2), 0.0, 0.25, 0, 10), Segment(segment_id(1, 3), 0.25, 0.5, 0, 20)]
    diagram = stream_diagram(segments, current_epoch=1)
    boxes = {b.segment: b for b in diagram.boxes}
    assert [(b.segment, b.sealed) for b in diagram.boxes] == [("0.0", True), ("0.1", False), ("1.2", False),
                                                            ("1.3", False)]
    # the sealed segment spans epoch 0 only, its sibling both epochs; the successors start at epoch 1
    assert boxes["0.1"].width > 2 * boxes["0.0"].width
    assert boxes["1.2"].x == boxes["1.3"].x > boxes["0.0"].x + boxes["0.0"].width
    assert boxes["1.2"].y < boxes["1.3"].y < boxes["0.1"].y and boxes["1.2"].height == boxes["1.3"].height
    # one link from the split segment to each successor, across the gap between the columns
    assert len(diagram.links) == 2
    assert all(round(link.x2 - link.x1, 1) == GAP for link in diagram.links)
    assert {link.y1 for link in diagram.links} == {boxes["0.0"].y + boxes["0.0"].height / 2}
    assert diagram.description == "4 segments over 2 epochs (1 sealed, 3 active), 2 predecessor links"
