"""Metadata tables: leases of the controller service (migration 0005).

One row per leased resource ("retention:<scope>/<stream>", "sweep", "member:<owner>"). A lease is
held while `owner` is set and `expires_ms` is in the future by the client clock; a released lease
keeps its row (owner NULL) so `version`, the fencing token, only ever grows: every new holder gets
a larger version than any earlier one. `work_done_ms` is when the last unit of work on the
resource ended (whoever did it), so a process that takes a resource over keeps the spacing.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("resource", sa.String(600), primary_key=True),
    sa.Column("owner", sa.String(255), nullable=True),  # host:pid:uuid; NULL once released
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),  # fencing token, +1 per new holder
    sa.Column("acquired_ms", sa.BigInteger, nullable=False),
    sa.Column("work_done_ms", sa.BigInteger, nullable=True),
)
