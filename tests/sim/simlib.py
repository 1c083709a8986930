"""Helpers to build simulated clusters with the real `mlx-fleet sim` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent
MLX_FLEET = str(BIN / "mlx-fleet")


def mlx_fleet(*args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
    result = subprocess.run([MLX_FLEET, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"mlx-fleet {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


class Sim:
    """One simulated cluster in its own world-readable folder."""

    def __init__(self, **up_args):
        # Not under pytest's 0700 tmp: the simulated Macs' admin user reads files from here.
        self.dir = Path(tempfile.mkdtemp(prefix="mlx-fleet-sim-", dir="/var/tmp"))
        self.dir.chmod(0o755)
        argv = ["sim", "up", "--dir", str(self.dir)]
        for key, value in up_args.items():
            for item in value if isinstance(value, (list, tuple)) else [value]:  # a list repeats the option
                argv += [f"--{key.replace('_', '-')}", str(item)]
        mlx_fleet(*argv)
        self.inventory = yaml.safe_load((self.dir / "inventory.yml").read_text())
        self.nodes = list(self.inventory["all"]["children"]["mlx_cluster"]["hosts"])

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        sub, *rest = args
        return mlx_fleet("sim", sub, "--dir", str(self.dir), *rest, check=check)

    def ssh(self, node: str, command: str, check: bool = True, own_config: bool = False) -> subprocess.CompletedProcess:
        """Plain `ssh NODE`, as MLX's tools call it (through the ssh_config drop-in); `own_config`
        reads this cluster's ssh_config only, whatever other clusters answer to the same name."""
        config = ["-F", str(self.dir / "ssh_config")] if own_config else []
        result = subprocess.run(["ssh", *config, "-o", "BatchMode=yes", node, command], capture_output=True, text=True,
                                timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"ssh {node} {command!r} exited {result.returncode}: {result.stderr}")
        return result

    def own_ssh_env(self) -> dict:
        """os.environ with a plain `ssh` first on PATH that reads this cluster's ssh_config only, for tools
        such as mlx.launch that call `ssh NODE`: other clusters on the machine may have the same node names."""
        folder = self.dir / "own-ssh"
        if not folder.exists():
            folder.mkdir()
            wrapper = folder / "ssh"
            wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('ssh')} -F {self.dir / 'ssh_config'} \"$@\"\n")
            wrapper.chmod(0o755)
        return dict(os.environ, PATH=f"{folder}:{os.environ['PATH']}")

    def profile(self, node: str) -> dict:
        """The node's simulated hardware (node.json)."""
        return json.loads((self.dir / "nodes" / node / "fs/usr/local/libexec/macsim/node.json").read_text())

    def device(self, node: str, receptacle: int) -> str:
        """The enX a node's Thunderbolt port N is, from the simulated hardware."""
        return next(p["device"] for p in self.profile(node)["thunderbolt"] if p["receptacle"] == receptacle)

    def state(self) -> dict:
        return json.loads((self.dir / "state.json").read_text())

    def down(self) -> None:
        if (self.dir / "state.json").exists():
            self.cli("down")
        shutil.rmtree(self.dir, ignore_errors=True)


NODE_PYTHON = Path("/var/tmp/mlx-fleet-node-python")
REPO = Path(__file__).resolve().parents[2]


def node_python() -> tuple[str, str]:
    """A Python with MLX at one path every simulated Mac can run, and the all_sum example beside it.

    Made from the nodes' own /usr/bin/python3, outside the sim's private folders, so that
    mlx.launch finds the same interpreter on every node (until the mlx_env role installs one).
    """
    python = NODE_PYTHON / "venv/bin/python"
    if not python.exists():
        NODE_PYTHON.mkdir(mode=0o755, parents=True, exist_ok=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(NODE_PYTHON / "venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "mlx[cpu]==0.32.4"],
                       check=True)
    script = NODE_PYTHON / "all_sum.py"
    shutil.copyfile(REPO / "examples" / "all_sum.py", script)
    script.chmod(0o644)
    return str(python), str(script)


def cable_networks(folder: Path) -> dict[str, str]:
    """Each cable's /30 ("a:1 -- b:2" -> network) by the cluster model the last converge wrote in folder."""
    return {link["cable"]: link["network"] for link in json.loads((folder / "cluster.json").read_text())["links"]}
