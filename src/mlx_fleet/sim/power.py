"""macsim's power agent: the hardware side of a restart a simulated Mac asks for itself.

A node cannot restart itself (its namespaces are the sim controller's), so when an update's
preparation ends, the `softwareupdate` double writes `power-request.json` in the node and this
agent, started by `mlx-fleet sim offer` and run on the host, restarts that node into the new build
(Cluster.install_update). It also starts up a FileVault-locked node once a password login over SSH
unlocked it. It exits when the cluster goes down.

    python -m mlx_fleet.sim.power DIR
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from mlx_fleet.sim.cluster import Cluster
from mlx_fleet.sim.state import LIBEXEC

POLL_SECONDS = 0.2


def pending(cluster: Cluster) -> list[tuple[str, Path]]:
    requests = [(name, cluster.fs(name) / LIBEXEC / "power-request.json") for name in cluster.node_names()]
    return [(name, path) for name, path in requests if path.exists()]


def main(argv: list[str]) -> int:
    sim_dir = Path(argv[0]).resolve()
    me = os.getpid()
    while True:
        cluster = Cluster(sim_dir)
        if not cluster.state or cluster.state.get("power_agent") not in (None, me):
            return 0  # the cluster is down, or another agent serves it
        for name, request in pending(cluster):
            update = json.loads(request.read_text())["install"]
            request.unlink()
            try:
                Cluster(sim_dir).install_update(name, update)
                print(f"{name}: restarted into macOS {update['version']} ({update['build']})", flush=True)
            except Exception:  # one node's trouble must not stop the agent for the others
                traceback.print_exc()
        for name in cluster.node_names():
            if cluster.unlocked_over_ssh(name):  # the data volume unlocks; SSH drops while the rest starts
                try:
                    Cluster(sim_dir).unlock(name)
                    print(f"{name}: FileVault unlocked over SSH", flush=True)
                except Exception:
                    traceback.print_exc()
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
