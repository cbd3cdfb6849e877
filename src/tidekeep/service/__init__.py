"""The controller service (`tidekeep serve`): leases in the metadata store, the pure scheduling
core and the process that runs retention cycles and the orphan-chunk sweep."""

from .leases import Lease, LeaseAction, LeaseDecision, LeaseStore, decide_lease, new_owner_id

__all__ = ["Lease", "LeaseAction", "LeaseDecision", "LeaseStore", "decide_lease", "new_owner_id"]
