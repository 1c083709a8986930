"""`make demo`: a 3-Mac simulated mesh, what MLX's own tools see on it, mlx-fleet's converge and audit of it, and
a job run on every rank."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
SIM_DIR = Path(os.environ.get("SIM_DIR", ".sim/demo")).resolve()


def step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


def sh(*argv: str, check: bool = True) -> int:
    print("$ " + " ".join(argv), flush=True)
    return subprocess.run(list(argv), check=check, stdin=subprocess.DEVNULL).returncode


def main() -> int:
    mlx_fleet = str(BIN / "mlx-fleet")
    if (SIM_DIR / "state.json").exists():
        step("Removing the previous demo cluster")
        sh(mlx_fleet, "sim", "down", "--dir", str(SIM_DIR))
    SIM_DIR.mkdir(parents=True, exist_ok=True)

    step("Three simulated M4 Pro Mac minis, cabled as a Thunderbolt 5 full mesh")
    sh(mlx_fleet, "sim", "up", "--dir", str(SIM_DIR), "--nodes", "3", "--topology", "mesh")

    step("Each one answers like a Mac over plain ssh")
    sh("ssh", "mini-1", "sw_vers; sysctl hw.model; networksetup -listallhardwareports | head -12; ibv_devices")

    step("MLX's own discovery finds the mesh and writes a JACCL hostfile")
    hostfile = SIM_DIR / "distributed_config-hostfile.json"
    sh(str(BIN / "mlx.distributed_config"), "--hosts", "mini-1,mini-2,mini-3", "--over", "thunderbolt",
       "--backend", "jaccl", "--auto-setup", "--output-hostfile", str(hostfile))
    print(hostfile.read_text())

    inventory = str(SIM_DIR / "inventory.yml")
    step("mlx-fleet converges the cluster (site.yml) and sums it up")
    sh(mlx_fleet, "converge", "-i", inventory)

    step("Nothing drifted: the audit compares every Mac with the declared state and with each other")
    sh(mlx_fleet, "audit", "-i", inventory, check=False)

    step("A job on every rank: mlx-fleet run checks the cluster, launches, keeps each rank's log and the record")
    # The TCP ring: the simulated Macs run on Linux, which has no RDMA data path for JACCL (a real mesh of
    # Thunderbolt 5 Macs with RDMA on runs the published jaccl hostfile: --backend auto).
    sh(mlx_fleet, "run", "-i", inventory, "--backend", "ring", "--all-ranks", "--",
       str(Path(__file__).resolve().parents[1] / "examples" / "all_sum.py"), check=False)

    step("The cluster stays up for you to explore")
    print("  ssh mini-2                                   # a simulated Mac")
    print(f"  {mlx_fleet} sim status --dir {SIM_DIR}")
    print(f"  {mlx_fleet} sim unplug --dir {SIM_DIR} mini-1:2    # pull a cable")
    print(f"  {mlx_fleet} verify -i {inventory} --sizes 1KiB:1MiB   # MLX jobs over the hostfile")
    print(f"  {mlx_fleet} ps -i {inventory}                      # MLX jobs on the Macs")
    print(f"  {mlx_fleet} sim down --dir {SIM_DIR}              # remove it all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
