"""The column type of stream positions: {segment id: offset} stored as JSON text.

Every column that holds positions of a stream (a stream's head, a writer's committed positions, the
retention set's cuts, subscribers' acknowledged and start cuts, transactions' landing positions,
writer marks and watermark cuts) uses this one type, so the encoding lives in one place: keys are the
decimal 64-bit segment ids (never the "epoch.number" form shown to people), sorted, values the
offsets. The database sees plain TEXT, as the migrations create it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa


def positions_to_json(positions: Mapping[int, int]) -> str:
    """The stored text of positions (also what audit rows record as a head)."""
    return json.dumps({str(int(s)): o for s, o in sorted(positions.items())})


def positions_from_json(text: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in json.loads(text).items()}


class PositionsJSON(sa.types.TypeDecorator[dict[int, int]]):
    """{segment id: offset} <-> JSON text; None stays NULL."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Mapping[int, int] | None, dialect: sa.Dialect) -> str | None:
        return None if value is None else positions_to_json(value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> dict[int, int] | None:
        return None if value is None else positions_from_json(value)


__all__ = ["PositionsJSON", "positions_from_json", "positions_to_json"]
