"""The controller service (`tidekeep serve`): the pure scheduling core, periodic tasks run under
leases (service/tasks.py) and per-stream ones under the stream leases (service/stream_tasks.py),
their assembly from the Workspace and the families' work (service/assembly.py) and the process that
runs it all (service/server.py). The leases themselves live in store/leases.py."""

from ..store.leases import Lease, LeaseAction, LeaseDecision, LeaseStore, decide_lease, new_owner_id
from .stream_tasks import RetentionTask, StreamTasks, WatermarkTask
from .tasks import CronTask, IntervalTask, LeaseUse, Outcome, PeriodicTask, run_exclusive

__all__ = ["CronTask", "IntervalTask", "Lease", "LeaseAction", "LeaseDecision", "LeaseStore", "LeaseUse", "Outcome",
           "PeriodicTask", "RetentionTask", "StreamTasks", "WatermarkTask", "decide_lease", "new_owner_id",
           "run_exclusive"]
