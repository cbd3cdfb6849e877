"""The controller service (`tidekeep serve`): the pure scheduling core, periodic tasks run under
leases (service/tasks.py), their assembly from the families' work (service/assembly.py) and the
process that runs it all (service/server.py). The leases themselves live in store/leases.py."""

from ..store.leases import Lease, LeaseAction, LeaseDecision, LeaseStore, decide_lease, new_owner_id
from .tasks import CronTask, IntervalTask, PeriodicTask, run_exclusive

__all__ = ["CronTask", "IntervalTask", "Lease", "LeaseAction", "LeaseDecision", "LeaseStore", "PeriodicTask",
           "decide_lease", "new_owner_id", "run_exclusive"]
