"""Legal holds, as the client offers them: while a target is held, nothing deletes its data.

The value, the table's one reader, the lookups and `HoldStore` live in the foundation
(store/holds.py); each family registers its kinds there — "stream" (streams/holds.py), "records"
(catalog/holds.py), "dataset" and "archive" (archives/holds.py) — and importing this module
imports all three, so every kind can be added and removed. docs/holds.md lists every deleting
operation and what it checks.
"""

from __future__ import annotations

from .archives import holds as archive_holds
from .catalog import holds as record_holds
from .store.holds import HOLD_KINDS, Hold, HoldStore, holds_covering
from .streams import holds as stream_holds

# the families' hold kinds, registered as these modules were imported
REGISTERED = (stream_holds.STREAM_KIND, record_holds.RECORDS_KIND, archive_holds.DATASET_KIND,
              archive_holds.ARCHIVE_KIND)

__all__ = ["HOLD_KINDS", "REGISTERED", "Hold", "HoldStore", "holds_covering"]
