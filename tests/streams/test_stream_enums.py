"""Stream states, reader-group retention types and retention rule codes are enums wherever they
surface, while what is stored and printed stays the plain text it always was."""

from __future__ import annotations

import json

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store import schema as t
from tidekeep.streams.config import RetentionType
from tidekeep.streams.repository import StreamStatus
from tidekeep.streams.rule_codes import RuleCode

STREAM = "enums/s"


def test_a_streams_state_is_a_stream_status_stored_as_its_name(client: tk.Client) -> None:
    info = client.create_stream(STREAM, tk.StreamConfig(segments=1))
    assert info.state is StreamStatus.ACTIVE
    assert client.stream(STREAM).state().info.state is StreamStatus.ACTIVE
    client.stream(STREAM).seal()
    assert [s.state for s in client.list_streams("enums")] == [StreamStatus.SEALED]
    with client.workspace.db.read() as conn:
        stored = conn.execute(sa.select(t.streams.c.state)).scalar_one()
    assert type(stored) is str and stored == "SEALED"


def test_a_subscribers_retention_type_is_the_enum_and_its_dict_the_text(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    manual = RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM], retention_type=manual))
    [subscriber] = client.stream(STREAM).subscribers()
    assert subscriber.retention_type is manual
    assert json.loads(json.dumps(subscriber.to_dict()))["retention_type"] == "MANUAL_RELEASE_AT_USER_STREAMCUT"


def test_a_decisions_rule_is_a_retention_rule_and_its_dict_the_code(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(10)))
    decision = client.stream(STREAM).retention.preview()
    assert decision.rule is RuleCode.BELOW_MIN  # the preview records the empty tail: it holds 0 B
    rendered = decision.to_dict()["rule"]
    assert type(rendered) is str and rendered == decision.rule.value
