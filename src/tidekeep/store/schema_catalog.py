"""Metadata tables: the catalog (migration 0007).

- `catalog_records`: one row per stored data item (Stroom's `meta`). Times are ms since the epoch,
  UTC. `status` is UNLOCKED, LOCKED or DELETED; `status_time` is when it last changed (the purge
  counts its age from there). `attributes` is a JSON object of custom attributes, string values
  only, keys sorted, so every compiler reads it the same way.
- `catalog_dictionaries`: named word lists for IN_DICTIONARY terms.
- `catalog_rules`: the rule set document (one row, name "default"); `version` is a new random
  UUID on every save, which invalidates every tracker (docs/design/catalog.md#trackers).
- `catalog_trackers`: when each rule age's period was last processed under a rules version.
- `catalog_runs`: one row per retention job or purge run, with its fixed `now` and its report.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

# SQLite only auto-assigns INTEGER PRIMARY KEY (the rowid alias), not BIGINT
RECORD_ID_TYPE = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

catalog_records = sa.Table(
    "catalog_records",
    metadata,
    sa.Column("id", RECORD_ID_TYPE, primary_key=True, autoincrement=True),
    sa.Column("feed", sa.String(255), nullable=False),
    sa.Column("type", sa.String(255), nullable=False),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("effective_time", sa.BigInteger, nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("status_time", sa.BigInteger, nullable=False),
    sa.Column("parent_id", sa.BigInteger, nullable=True),
    sa.Column("pipeline", sa.String(255), nullable=True),
    sa.Column("file_size", sa.BigInteger, nullable=True),
    sa.Column("raw_size", sa.BigInteger, nullable=True),
    sa.Column("location", sa.Text, nullable=True),
    sa.Column("attributes", sa.Text, nullable=True),
)
# the job scans one period of UNLOCKED rows by create time; the purge DELETED rows by status time
sa.Index("ix_catalog_records_status_create_time", catalog_records.c.status, catalog_records.c.create_time)
sa.Index("ix_catalog_records_status_status_time", catalog_records.c.status, catalog_records.c.status_time)
# records listed in id order by status or feed (RecordStore.list: the CLI, API and dashboard), migration 0015
sa.Index("ix_catalog_records_status_id", catalog_records.c.status, catalog_records.c.id)
sa.Index("ix_catalog_records_feed_id", catalog_records.c.feed, catalog_records.c.id)

catalog_dictionaries = sa.Table(
    "catalog_dictionaries",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("words", sa.Text, nullable=False),  # JSON list of strings
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

catalog_rules = sa.Table(
    "catalog_rules",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.String(36), nullable=False),
    sa.Column("document", sa.Text, nullable=False),  # JSON list of rules
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_by", sa.String(255), nullable=False),
)

catalog_trackers = sa.Table(
    "catalog_trackers",
    metadata,
    sa.Column("rules_version", sa.String(36), primary_key=True),
    sa.Column("rule_age", sa.String(64), primary_key=True),
    sa.Column("last_run_ms", sa.BigInteger, nullable=False),
)

catalog_runs = sa.Table(
    "catalog_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),  # retention | purge
    sa.Column("state", sa.String(16), nullable=False),  # RUNNING | SUCCEEDED | FAILED
    sa.Column("dry_run", sa.Boolean, nullable=False),
    sa.Column("now_ms", sa.BigInteger, nullable=False),
    sa.Column("started_ms", sa.BigInteger, nullable=False),
    sa.Column("finished_ms", sa.BigInteger, nullable=True),
    sa.Column("rules_version", sa.String(36), nullable=True),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("report", sa.Text, nullable=True),  # JSON
)
