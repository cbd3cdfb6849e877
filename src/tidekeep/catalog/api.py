"""`client.catalog`: one object for every catalog operation. Each method delegates to the module
that owns the work, imported on first use so `import tidekeep` stays light."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.fencing import LeaseFence
    from ..store.house import Workspace
    from .explain import Explanation
    from .generate import GenerateReport
    from .impact import ImpactSummary
    from .importer import ImportReport
    from .job import RunReport
    from .purge import PurgeReport
    from .records import MetaRecord
    from .rule_input import RulesInput
    from .rules import RuleSet
    from .rules_store import SavedRules

Progress = Callable[[int, int], None]  # (done, total) in the unit of the operation


class Catalog:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    # ---- records (records.py, record_store.py, importer.py, generate.py) ----------------------
    def add(self, records: Iterable[MetaRecord | Mapping[str, Any]]) -> list[int]:
        """Add meta records (MetaRecord or mappings); returns their ids, in order."""
        from .record_store import RecordStore

        return RecordStore(self.workspace).add(records)

    def get(self, record_id: int) -> MetaRecord:
        from .record_store import RecordStore

        return RecordStore(self.workspace).get(record_id)

    def records(self, **filters: Any) -> list[MetaRecord]:
        from .record_store import RecordStore

        return RecordStore(self.workspace).list(**filters)

    def count(self, status: str | None = None) -> int:
        from .record_store import RecordStore

        return RecordStore(self.workspace).count(status)

    def import_path(self, path: str | Path, format: str | None = None,
                    progress: Progress | None = None) -> ImportReport:
        """Bulk import CSV, JSON lines or Parquet through Spark."""
        from .importer import import_records

        return import_records(self.workspace, path, format=format, progress=progress)

    def generate(self, rows: int, seed: int = 0, progress: Progress | None = None, **options: Any) -> GenerateReport:
        """Synthetic records for demos and benchmarks (deterministic for a seed)."""
        from .generate import generate_records

        return generate_records(self.workspace, rows, seed=seed, progress=progress, **options)

    # ---- dictionaries (dictionaries.py) -------------------------------------------------------
    def set_dictionary(self, name: str, words: Sequence[str]) -> None:
        from .dictionaries import DictionaryStore

        DictionaryStore(self.workspace).set(name, words)

    def dictionary(self, name: str) -> list[str]:
        from .dictionaries import DictionaryStore

        return DictionaryStore(self.workspace).get(name)

    def dictionaries(self) -> dict[str, list[str]]:
        from .dictionaries import DictionaryStore

        return DictionaryStore(self.workspace).all()

    def delete_dictionary(self, name: str) -> None:
        from .dictionaries import DictionaryStore

        DictionaryStore(self.workspace).delete(name)

    # ---- rules (ages.py, rules.py, rules_store.py) --------------------------------------------
    def rules(self) -> RuleSet:
        """The saved rule set (RuleSet: version + rules); an empty set before the first save."""
        from .rules_store import RulesStore

        return RulesStore(self.workspace).load()

    def saved_rules(self) -> SavedRules:
        """The saved rule set with when and by whom it was saved (`tidekeep catalog rules show`)."""
        from .rules_store import RulesStore

        return RulesStore(self.workspace).saved()

    def validate_rules(self, rules: RulesInput) -> RuleSet:
        """Check `rules` exactly as `set_rules` would (dictionaries too) and save nothing; returns
        them as a RuleSet with version ""."""
        from .rule_input import rules_from_input
        from .rules_store import RulesStore

        return RulesStore(self.workspace).validate(rules_from_input(rules))

    def set_rules(self, rules: RulesInput, expected_version: str | None = None) -> RuleSet:
        """Save a rule set; returns it with its new version. `rules` is what `tidekeep catalog rules
        set` accepts — the text of a YAML or Stroom JSON rule file, or that document as mappings (a
        mapping with a `rules` list, or the list alone) — or a RuleSet, a list of RetentionRule, or a
        rule file's path (a Path; a one-line str that is no document is read as a path too).
        Invalid rules raise InvalidInput naming the rule and the field, and nothing is saved.
        `expected_version`: the version the edit is based on ("" when none was saved); if the saved
        version is another, StaleVersion and nothing is saved (checked inside the saving transaction)."""
        from .rule_input import rules_from_input
        from .rules_store import RulesStore

        return RulesStore(self.workspace).save(rules_from_input(rules), expected_version=expected_version)

    # ---- the job (source.py, writeback.py, job.py, impact.py, explain.py) ----------------------
    def run(self, dry_run: bool = False, progress: Progress | None = None, now_ms: int | None = None,
            fence: LeaseFence | None = None) -> RunReport:
        """Run the data retention job now; returns its report. `fence`: the service's catalog lease
        the run applies its deletes under (store/fencing.py); None for a manual run."""
        from .job import run_retention_job

        return run_retention_job(self.workspace, dry_run=dry_run, progress=progress, now_ms=now_ms, fence=fence)

    def impact(self, rules: RulesInput | None = None, now_ms: int | None = None,
               progress: Progress | None = None) -> ImpactSummary:
        """Per rule, feed and type: what would be deleted if the job ran now with no trackers, for
        the saved rules or `rules` (anything `set_rules` accepts). `progress` counts the candidate
        records scanned."""
        from .impact import impact_summary
        from .rule_input import rules_from_input

        chosen = None if rules is None else rules_from_input(rules)
        return impact_summary(self.workspace, rules=chosen, now_ms=now_ms, progress=progress)

    def explain(self, record_id: int, now_ms: int | None = None) -> Explanation:
        """The rule that decides a record's retention, its age, retain-until time and holds."""
        from .explain import explain_record

        return explain_record(self.workspace, record_id, now_ms=now_ms)

    def runs(self, limit: int = 20, before_id: int | None = None) -> list[Mapping[str, Any]]:
        """Recent retention and purge runs, newest first; `before_id`: only runs older than it."""
        from .runs import list_runs

        return list_runs(self.workspace, limit, before_id)

    def run_entry(self, run_id: int) -> Mapping[str, Any]:
        """One run as `runs` lists it; NotFound when it does not exist."""
        from .runs import get_run

        return get_run(self.workspace, run_id)

    # ---- purge (purge.py) -----------------------------------------------------------------------
    def purge(self, progress: Progress | None = None, now_ms: int | None = None, dry_run: bool = False,
              fence: LeaseFence | None = None) -> PurgeReport:
        """Remove the data of records DELETED for longer than catalog.purge_age, then their rows.
        `fence`: the service's catalog lease (store/fencing.py); None for a manual purge."""
        from .purge import purge_deleted

        return purge_deleted(self.workspace, progress=progress, now_ms=now_ms, dry_run=dry_run, fence=fence)
