"""The catalog's retention forecast (forecast.py, `catalog_forecast`) as the one forecast document
of what-if retention (tidekeep/forecast.py), so `tidekeep retention simulate --catalog` and the API
show it as they show a stream's or a dataset's (docs/catalog.md#retention-forecast)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..forecast import DEFAULT_DAYS, Family, Forecast, Tally, Unit, check_days

if TYPE_CHECKING:
    from ..spark.progress import Progress
    from ..store.house import Workspace

TARGET = "catalog"


def catalog_forecast_document(result: Mapping[str, Any], current: bool) -> Forecast:
    """`result`: a CatalogForecast's document ({"now_ms", "days", "rules_version", "rows": [{"day",
    "rule", "rule_name", "age", "rows", "bytes", "held_rows"}]}). The catalog counts held records,
    not their bytes: a line's held bytes are unknown (None)."""
    now_ms, days = int(result["now_ms"]), int(result["days"])
    tally = Tally(now_ms, Unit.RECORDS)
    rules: dict[str, dict[str, Any]] = {}
    for row in result["rows"]:
        rule = str(row["rule"])
        rules.setdefault(rule, {"name": row["rule_name"], "age": row["age"]})
        tally.add(int(row["day"]), rule, name=str(row["rule_name"]), bytes=int(row["bytes"]), items=int(row["rows"]),
                  held_bytes=None if row["held_rows"] else 0, held_items=int(row["held_rows"]))
    version = str(result.get("rules_version") or "")
    proposal = {"current": current, "rules_version": version or None}
    notes = ("forever rules and LOCKED records never appear; assumes the same records, rules and holds meanwhile",)
    return Forecast(Family.CATALOG, TARGET, now_ms, days, Unit.RECORDS, proposal, tally.lines(), notes,
                    {"rules": rules})


def catalog_forecast_of(workspace: Workspace, rules: Any = None, now_ms: int | None = None,
                        days: int = DEFAULT_DAYS, progress: Progress | None = None) -> Forecast:
    """The catalog's forecast for the saved rules (None) or `rules` (a rules file, a RuleSet),
    changing nothing; `progress` counts the candidate records scanned (a Spark job)."""
    from .forecast import catalog_forecast

    days = check_days(days)  # the same horizon as a stream's or a dataset's forecast
    found = catalog_forecast(workspace, rules=rules, now_ms=now_ms, days=days, progress=progress)
    return catalog_forecast_document(found.to_dict(), rules is None)


__all__ = ["catalog_forecast_document", "catalog_forecast_of"]
