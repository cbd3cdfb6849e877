"""What-if archive retention, by day (docs/archives-retention.md#what-if-retention): which archives of
a dataset expire at now and during each of the next N days under a retention period, by the
collector's own rules (expiry.py). Pure: the shell (expiry_forecast.py) loads the archives, the
searches and the holds.

Day 0 is the collector's sweep at now exactly (`plan_archive_sweep`: searches without a heartbeat
or over `search.max_runtime` end first, then the oldest RUNNING search holds the safe expiry back).
Day d (1..N) holds the archives that pass their retention during (now + (d−1)·24h, now + d·24h],
with the expiry now + d·24h − TTL: the searches running now are taken to have finished, and no
archive is added or removed meanwhile. Held archives (a dataset, archive or records hold) are kept
and reported apart on the day they would otherwise go; archives without timestamps never expire.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..forecast import DAY_MS, Family, Forecast, Tally, Unit
from .expiry import ArchivePlan, is_held, retention_ms
from .model import Archive

RULE = "retention-period"  # the one rule: newest timestamp older than the retention period
HELD = "held"


def expiry_forecast(dataset: str, archives: Sequence[Archive], retention_minutes: int | None, current: bool,
                    plan: ArchivePlan | None, held_datasets: Collection[str], held_archives: Collection[str],
                    held_why: Mapping[str, str], now_ms: int, days: int) -> Forecast:
    """The forecast of `dataset` (its `archives`) under `retention_minutes` (None: no retention).
    `plan`: the collector's plan at now over these archives (None without retention);
    `held_archives` includes the archives a records hold keeps; `held_why` says why each held one is."""
    tally = Tally(now_ms, Unit.ARCHIVES)
    details: dict[str, Any] = {"retention_minutes": retention_minutes}
    if retention_minutes is not None and plan is not None:
        name = f"{retention_minutes} min"
        gone = {a.id for a in plan.candidates} | {a.id for a in plan.held}
        for archive in plan.candidates:
            tally.add(0, RULE, name=name, bytes=archive.stored_bytes, items=1, ids=[archive.id])
        for archive in plan.held:
            tally.add(0, HELD, name=held_why.get(archive.id), held_bytes=archive.stored_bytes, held_items=1,
                      ids=[archive.id])
        later = [(day, a) for a in archives if a.id not in gone
                 and (day := expiry_day(a.end_ts, retention_minutes, now_ms)) is not None and day <= days]
        for day, archive in sorted(later, key=lambda found: (found[0], found[1].end_ts or 0, found[1].id)):
            if is_held(archive, held_datasets, held_archives):
                tally.add(day, HELD, name=held_why.get(archive.id), held_bytes=archive.stored_bytes,
                          held_items=1, ids=[archive.id])
            else:
                tally.add(day, RULE, name=name, bytes=archive.stored_bytes, items=1, ids=[archive.id])
        details.update(expiry_ms=plan.expiry_ms, held_back_by_job=None if plan.held_back_by is None
                       else plan.held_back_by.id)
    proposal = {"current": current, "retention_minutes": retention_minutes}
    return Forecast(Family.ARCHIVES, dataset, now_ms, days, Unit.ARCHIVES, proposal, tally.lines(),
                    notes(archives, retention_minutes, plan), details)


def expiry_day(end_ts: int | None, retention_minutes: int, now_ms: int) -> int | None:
    """The first day d >= 1 whose end expires the archive: `is_expired(end_ts, now + d·24h − TTL)`,
    i.e. end_ts + TTL − now < d·24h; None for an archive without timestamps. An archive expired
    already but kept at now by a running search is day 1 (that search is taken to have finished)."""
    if end_ts is None:
        return None
    return max((end_ts + retention_ms(retention_minutes) - now_ms) // DAY_MS + 1, 1)


def notes(archives: Sequence[Archive], retention_minutes: int | None, plan: ArchivePlan | None) -> tuple[str, ...]:
    if retention_minutes is None:
        return ("no retention period (archive_output.retention_period is null): archives are kept forever",)
    found = ["day 0 is the collector's sweep now; later days assume the searches running now have finished"]
    if plan is not None and plan.held_back_by is not None:
        found.append(f"now, running search {plan.held_back_by.id} holds the expiry back")
    timeless = sum(1 for a in archives if a.end_ts is None)
    if timeless:
        found.append(f"{timeless} archive(s) without timestamps never expire")
    return tuple(found)


__all__ = ["HELD", "RULE", "expiry_day", "expiry_forecast"]
