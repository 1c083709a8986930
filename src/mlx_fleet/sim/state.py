"""A simulated cluster's record (DIR/state.json) and each node's profile (its node.json): what
every part of macsim reads and saves."""

from __future__ import annotations

import json
from pathlib import Path


from mlx_fleet.sim import host
from mlx_fleet.sim.host import SimError, run
LIBEXEC = "usr/local/libexec/macsim"
# A Mac's own folders (and the files etc/hosts, etc/group, etc/shadow): /tmp too, as every Mac has its own.
PRIVATE_DIRS = ("opt", "usr/local", "Library", "Users", "etc/sudoers.d", "tmp")


class ClusterState:
    """The cluster's state on disk, its nodes by rank, and each node's disk folder and profile."""

    def __init__(self, sim_dir: str | Path):
        self.dir = Path(sim_dir).resolve()
        self.state_path = self.dir / "state.json"
        self.state = json.loads(self.state_path.read_text()) if self.state_path.exists() else None

    @property
    def index(self) -> int:
        return self.state["index"]

    def fs(self, name: str) -> Path:
        return self.dir / "nodes" / name / "fs"

    def _rank(self, name: str) -> int:
        return self.state["nodes"][name]["rank"]

    def node_names(self) -> list[str]:
        return sorted(self.state["nodes"], key=self._rank)

    def _require(self, name: str) -> dict:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir} (run: mlx-fleet sim up --dir {self.dir})")
        if name not in self.state["nodes"]:
            raise SimError(f"no node {name!r} in {self.dir}; nodes: {', '.join(self.node_names())}")
        return self.state["nodes"][name]

    def _require_up(self) -> None:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir} (run: mlx-fleet sim up --dir {self.dir})")

    def _save(self) -> None:
        host.write_file(self.state_path, json.dumps(self.state, indent=2))

    def profile(self, name: str) -> dict:
        return json.loads((self.fs(name) / LIBEXEC / "node.json").read_text())

    def _write_profile(self, name: str, profile: dict) -> None:
        host.write_file(self.fs(name) / LIBEXEC / "node.json", json.dumps(profile, indent=2))


def rmtree(path: Path) -> None:
    run(["rm", "-rf", "--one-file-system", str(path)], check=False)
