"""Legal holds, as the client offers them: while a target is held, nothing deletes its data.

The value, the table's one reader, the lookups and `HoldStore` live in the foundation
(store/holds.py); each family registers its kinds there — "stream" (streams/holds.py), "records"
(catalog/holds.py), "dataset" and "archive" (archives/holds.py). Importing this module registers
`load_family_holds`, which imports all three before the first hold is looked up, so every kind can
be added and removed, while a command that never looks a hold up does not load the families' hold
rules (the catalog's expressions among them). docs/holds.md lists every deleting operation and
what it checks.
"""

from __future__ import annotations

from .store.holds import HOLD_KINDS, Hold, HoldStore, holds_covering, register_loader


def load_family_holds() -> None:
    """Import the families' hold modules; each registers its kinds (and coverage) as it is imported."""
    from .archives import holds as archive_holds  # noqa: F401 (imported for its registrations)
    from .catalog import holds as record_holds  # noqa: F401
    from .streams import holds as stream_holds  # noqa: F401


register_loader(load_family_holds)

__all__ = ["HOLD_KINDS", "Hold", "HoldStore", "holds_covering", "load_family_holds"]
