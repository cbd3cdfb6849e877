"""`tidekeep retention simulate` for a stream, a dataset and the catalog: the text and --json of the
local command (the document is the library's), with `--server` through a live API printing exactly
what the local command prints; bad input is one line and changes nothing; simulating never writes
(audit, retention set, holds, archives, catalog records unchanged). SQLite: the subject is the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from tests.cli.test_cli_remote import Sides
from tests.helpers.api_server import live_api
from tests.helpers.archives import make_archive
from tests.helpers.cli_runner import assert_one_error_line, check_ok

import tidekeep as tk
from tidekeep.catalog.ages import Age, TimeUnit
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.forecast_document import catalog_forecast_of
from tidekeep.catalog.rules import RetentionRule, RuleSet, to_yaml_text
from tidekeep.store.schema import audit
from tidekeep.store.schema_archives import archives
from tidekeep.store.schema_catalog import catalog_records
from tidekeep.store.schema_holds import holds
from tidekeep.store.schema_retention import retention_set

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_700_000_000_000
AT = str(T0 + 2 * DAY)  # every side forecasts from the same now


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[Sides]:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True,
                        settings={"writer.linger": 0, "archive_output.retention_period": "1d"})
    try:
        with live_api(client.workspace) as api:
            yield Sides(api, client, tmp_path, url)
    finally:
        client.close()


def populate(client: tk.Client) -> None:
    """A stream with a retention set recorded over a day (cycles at explicit times), a dataset with
    archives of various ages, catalog records."""
    client.create_stream("sim/orders", tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_time("1d")))
    handle = client.stream("sim/orders")
    for hour in range(0, 30, 6):
        with handle.writer("w") as writer:
            writer.write_many([b"x" * 40] * 6, [f"k{i}" for i in range(6)])
        handle.retention.run(T0 + hour * HOUR)
    for hours in (70, 40, 30, 10):
        make_archive(client, "web", [(T0 + 2 * DAY - hours * HOUR, f"line {hours}")])
    client.catalog.add([{"feed": "F", "type": "T", "create_time": T0 + 2 * DAY - d * DAY - HOUR, "file_size": 10 * d}
                        for d in range(1, 6)])


def stored(client: tk.Client) -> dict[str, list[tuple[Any, ...]]]:
    with client.workspace.db.read() as conn:
        return {table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
                for table in (audit, retention_set, holds, archives, catalog_records)}


RULES = RuleSet("", (RetentionRule(1, "two days", True, parse('feed = "F"'), Age(2, TimeUnit.DAYS)),))


def test_local_forecasts_are_the_librarys_documents(sides: Sides, tmp_path: Path) -> None:
    client = sides.client
    populate(client)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(to_yaml_text(RULES))
    before = stored(client)
    stream = check_ok(sides.local("retention", "simulate", "--stream", "sim/orders", "--days", "3", "--at", AT,
                                  "--json")).json()
    assert stream == client.stream("sim/orders").retention.simulate(now=int(AT), days=3).forecast().to_dict()
    assert stream["totals"]["bytes"] > 0 and stream["details"]["now"]["rule"] == "no-max"
    proposed = check_ok(sides.local("retention", "simulate", "--stream", "sim/orders", "--time", "12h:20h", "--at",
                                    AT, "--json")).json()
    assert proposed == client.stream("sim/orders").retention.simulate(
        tk.RetentionPolicy.by_time("12h", "20h"), int(AT), 7).forecast().to_dict()
    assert proposed["proposal"]["current"] is False
    dataset = check_ok(sides.local("retention", "simulate", "--dataset", "web", "--retention", "36h", "--at", AT,
                                   "--json")).json()
    assert dataset == client.archives.forecast("web", "36h", int(AT), 7).to_dict()
    # retention 36h: the archives 70h and 40h old now, the 30h old one during day 1, the 10h old one on day 2
    assert [(line["day"], line["items"]) for line in dataset["lines"]] == [(0, 2), (1, 1), (2, 1)]
    catalog = check_ok(sides.local("retention", "simulate", "--catalog", "--rules", str(rules_file), "--days", "4",
                                   "--at", AT, "--json")).json()
    assert catalog == catalog_forecast_of(client.workspace, str(rules_file), int(AT), 4).to_dict()
    assert [(line["day"], line["items"], line["bytes"]) for line in catalog["lines"]] == [
        (0, 4, 140), (1, 1, 10)]  # created 5..2 days and an hour before now, then the one of a day ago
    assert stored(client) == before  # nothing was written

    text = check_ok(sides.local("retention", "simulate", "--stream", "sim/orders", "--at", AT)).stdout
    assert "forecast of  stream sim/orders" in text and "DAY  UNTIL" in text and "no-max" in text
    assert "total: " in text and "note: assumes no new writes" in text
    quiet = check_ok(sides.local("retention", "simulate", "--stream", "sim/orders", "--size", "1GB", "--at", AT))
    assert "nothing would be deleted now or in the next 7 day(s)" in quiet.stdout


@pytest.mark.parametrize(("args", "code", "fragment"), [
    ((), 2, "give one of --stream NAME, --dataset NAME or --catalog"),
    (("--stream", "sim/orders", "--dataset", "web"), 2, "give only one of --stream, --dataset and --catalog, not "
                                                        "--stream and --dataset"),
    (("--dataset", "web", "--size", "1GB"), 2, "--size goes with --stream, not with --dataset"),
    (("--stream", "sim/orders", "--retention", "1d"), 2, "--retention goes with --dataset, not with --stream"),
    (("--stream", "sim/orders", "--rules", "x.yaml"), 2, "--rules goes with --catalog, not with --stream"),
    (("--stream", "sim/orders", "--days", "367"), 2, "invalid --days 367: expected a whole number of days from 0"),
    (("--stream", "sim/orders", "--days", "-1"), 2, "invalid --days -1"),
    (("--stream", "sim/orders", "--at", "soonish"), 2, "invalid --at 'soonish'"),
    (("--stream", "sim/orders", "--size", "5:"), 2, "expected MIN or MIN:MAX"),
    (("--stream", "sim/orders", "--size", "1GB", "--time", "1d"), 2, "give only one retention option"),
    (("--stream", "sim/missing"), 3, "stream 'sim/missing' does not exist"),
    (("--dataset", "nope"), 3, "dataset 'nope' does not exist"),
    (("--dataset", "web", "--retention", "90s"), 2, "not a whole number of minutes"),
    (("--catalog", "--rules", "/nowhere/rules.yaml"), 3, "rule file '/nowhere/rules.yaml' does not exist"),
])
def test_bad_input_is_one_line_and_changes_nothing(sides: Sides, args: tuple[str, ...], code: int,
                                                   fragment: str) -> None:
    populate(sides.client)
    before = stored(sides.client)
    assert_one_error_line(sides.local("retention", "simulate", *args), code, fragment)
    assert stored(sides.client) == before


def test_with_server_the_same_forecasts_and_text(sides: Sides, tmp_path: Path) -> None:
    populate(sides.client)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(to_yaml_text(RULES))
    viewer, operator = sides.token("viewer"), sides.token("operator")
    before = stored(sides.client)
    for token, args in ((viewer, ("--stream", "sim/orders", "--days", "3")),
                        (viewer, ("--stream", "sim/orders", "--size", "200:500")),
                        (viewer, ("--dataset", "web", "--retention", "2d")),
                        (operator, ("--catalog", "--rules", str(rules_file), "--days", "2")),
                        (operator, ("--catalog",))):
        remote = check_ok(sides.remote("retention", "simulate", *args, "--at", AT, "--json", token=token)).json()
        local = check_ok(sides.local("retention", "simulate", *args, "--at", AT, "--json")).json()
        assert remote == local, args
        text = check_ok(sides.remote("retention", "simulate", *args, "--at", AT, token=token)).stdout
        assert text == check_ok(sides.local("retention", "simulate", *args, "--at", AT)).stdout, args
    assert stored(sides.client) == before
    # refused as the local command refuses, and by role and scope
    assert_one_error_line(sides.remote("retention", "simulate", "--days", "400", "--stream", "sim/orders",
                                       token=viewer), 2, "invalid --days 400")
    assert_one_error_line(sides.remote("retention", "simulate", "--stream", "sim/orders", "--at", "soonish",
                                       token=viewer), 2, "invalid --at 'soonish'")
    assert_one_error_line(sides.remote("retention", "simulate", "--catalog", token=viewer), 18, "operator")
    scoped = sides.token("viewer", "other")
    assert_one_error_line(sides.remote("retention", "simulate", "--stream", "sim/orders", token=scoped), 18,
                          "limited to scope 'other'")
    assert_one_error_line(sides.remote("retention", "simulate", "--dataset", "web", token=scoped), 18,
                          "needs a token without a scope")
