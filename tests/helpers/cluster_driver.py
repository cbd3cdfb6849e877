"""A driver process on the standalone cluster (or on local[2]): runs scenarios of cluster_scenarios.py.

    python cluster_driver.py WORKDIR SCENARIO [SCENARIO ...]

The workspace comes from the TIDEKEEP_* environment (its spark.master the cluster's), the driver's
Spark configuration from SPARK_CONF_DIR (cluster.driver_conf: the event log goes to WORKDIR/events).
The session is tidekeep's own (client.spark()), as for any user. Prints one line
`RESULT <json>`: each scenario's result and, from the event log once Spark stopped (on the
cluster), the hosts that ran each step's tasks and the tasks that failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    workdir, scenarios = Path(argv[0]), argv[1:]
    import tidekeep as tk
    from helpers.cluster import failed_tasks, task_hosts_by_step
    from helpers.cluster_scenarios import SCENARIOS

    client = tk.connect(create=True)
    spark = client.spark()
    try:
        results = {}
        for scenario in scenarios:
            (workdir / scenario).mkdir(parents=True, exist_ok=True)
            results[scenario] = SCENARIOS[scenario](client, spark, workdir / scenario)
    finally:
        client.close()
        spark.stop()  # the event log is complete once the context stopped
    events = workdir / "events"
    ran = {"hosts": task_hosts_by_step(events), "failed": failed_tasks(events)} if events.is_dir() else {}
    print("RESULT " + json.dumps({"results": results, **ran}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
