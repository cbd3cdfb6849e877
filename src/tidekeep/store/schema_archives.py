"""Metadata tables: log archives, search jobs and the archive collector's journal (migrations 0008, 0012).

- `archive_datasets`: one row per dataset (created by its first ingest). Holds on a dataset and the
  archive collector lock this row, so a hold and a collection of one dataset serialise.
- `archives`: one row per archive file (Parquet, zstd) under `archives/<dataset>/<id>.parquet` in
  storage. `begin_ts`/`end_ts` are the oldest/newest log timestamps (ms, UTC); both are NULL for an
  archive of messages without timestamps, which never expires. `catalog_record_id` is the archive's
  meta record in `catalog_records` (feed = dataset, type `Archive`), deleted together with the row.
- `archive_search_jobs`: CLP's `query_jobs`. `state` is RUNNING, SUCCEEDED, FAILED, CANCELLED or
  KILLED; only a RUNNING job holds back archive expiry. `lower_bound_ms` is the expiry bound fixed
  when the job was created (archives ending before it are never searched). Results live in storage
  under `results_path`; `results_expired_ms` is set when the search-result collector expires them.
  `heartbeat_ms` is when the searching process last said it is alive, every `heartbeat_interval_ms`
  (the interval it promised, fixed at creation); the archive collector marks a RUNNING job silent
  for too long FAILED (migration 0012). Both are NULL for jobs created before that migration, and
  for a job that promised no heartbeat: only `search.max_runtime` ends those.
- `archive_gc_journal`: the archive collector's write-ahead list of deletion candidates. It is in the
  metadata store rather than in a local file (CLP's choice) so that a collector on another host that
  takes over the lease also finds and finishes a crashed sweep.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

archive_datasets = sa.Table(
    "archive_datasets",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

archives = sa.Table(
    "archives",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("dataset", sa.String(255), sa.ForeignKey("archive_datasets.name"), nullable=False),
    sa.Column("begin_ts", sa.BigInteger, nullable=True),
    sa.Column("end_ts", sa.BigInteger, nullable=True),
    sa.Column("message_count", sa.BigInteger, nullable=False),
    sa.Column("raw_bytes", sa.BigInteger, nullable=False),
    sa.Column("stored_bytes", sa.BigInteger, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("ingest_id", sa.String(32), nullable=False),
    sa.Column("catalog_record_id", sa.BigInteger, nullable=True),
)
# the collector and the search planner select by end timestamp, per dataset
sa.Index("ix_archives_dataset_end_ts", archives.c.dataset, archives.c.end_ts)

archive_search_jobs = sa.Table(
    "archive_search_jobs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(255), nullable=False),
    sa.Column("query", sa.Text, nullable=False),
    sa.Column("regex", sa.Boolean, nullable=False),
    sa.Column("ignore_case", sa.Boolean, nullable=False),
    sa.Column("begin_ts", sa.BigInteger, nullable=True),
    sa.Column("end_ts", sa.BigInteger, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("completed_ms", sa.BigInteger, nullable=True),
    sa.Column("lower_bound_ms", sa.BigInteger, nullable=True),
    sa.Column("archives_searched", sa.Integer, nullable=False),
    sa.Column("results_count", sa.BigInteger, nullable=False),
    sa.Column("results_path", sa.Text, nullable=True),
    sa.Column("results_expired_ms", sa.BigInteger, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("heartbeat_ms", sa.BigInteger, nullable=True),
    sa.Column("heartbeat_interval_ms", sa.BigInteger, nullable=True),
)
# safe expiry asks for the oldest RUNNING job; the result collector for completed jobs by end time
sa.Index("ix_archive_search_jobs_state_created_ms", archive_search_jobs.c.state, archive_search_jobs.c.created_ms)

archive_gc_journal = sa.Table(
    "archive_gc_journal",
    metadata,
    sa.Column("archive_id", sa.String(32), primary_key=True),
    sa.Column("dataset", sa.String(255), nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("stored_bytes", sa.BigInteger, nullable=False),
    sa.Column("end_ts", sa.BigInteger, nullable=True),
    sa.Column("journaled_ms", sa.BigInteger, nullable=False),
)
