"""Put on a Spark Python worker's PYTHONPATH (helpers/durability.py does, through the SparkContext's
worker environment). With TIDEKEEP_TEST_FSYNC_LOG set, every os.fsync in the worker is appended to
that file as one JSON line (fsync_record.describe_fd), after the real fsync; with
TIDEKEEP_TEST_COMMIT_QUERY set too, so is every SQLAlchemy commit in the worker (the Spark sink's
driver side commits in such a worker), with what the query returns just before it. Nothing
otherwise."""

import os

_LOG = os.environ.get("TIDEKEEP_TEST_FSYNC_LOG")
_COMMIT_QUERY = os.environ.get("TIDEKEEP_TEST_COMMIT_QUERY")

if _LOG:
    import json

    from fsync_record import describe_fd

    def _append(record: dict) -> None:
        with open(_LOG, "a", encoding="utf-8") as log:  # one short append per line: lines never interleave
            log.write(json.dumps(record) + "\n")

    _real_fsync = os.fsync

    def _recording_fsync(fd: int) -> None:
        _real_fsync(fd)
        _append(describe_fd(fd))

    os.fsync = _recording_fsync

    if _COMMIT_QUERY:
        from sqlalchemy import Engine, event

        @event.listens_for(Engine, "commit")
        def _record_commit(conn) -> None:  # type: ignore[no-untyped-def]
            cursor = conn.connection.driver_connection.cursor()
            try:
                cursor.execute(_COMMIT_QUERY)
                visible = sorted(str(row[0]) for row in cursor.fetchall())
            finally:
                cursor.close()
            _append({"pid": os.getpid(), "commit": visible})
