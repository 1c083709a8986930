"""`mlx-fleet hostfile` as a person sees it: a summary at default verbosity, one line for a user error."""

from __future__ import annotations

import json

import pytest
import yaml
from simlib import Sim, mlx_fleet

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=3)
    yield sim
    sim.down()


def test_hostfile_prints_backend_reason_and_paths(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "inventory.yml"))
    out = result.stdout.splitlines()
    hostfile = cluster.dir / ".mlx-fleet" / "hostfile.json"
    assert "backend: jaccl (auto chose jaccl: the cables form a full mesh and every host and cable can carry RDMA)" in out
    assert any(line.startswith("hostfiles: ") and str(hostfile) in line for line in out)
    assert out[-1] == "result: ok"
    assert json.loads(hostfile.read_text())["backend"] == "jaccl"
    # The full Ansible output is kept with the run, not printed.
    (log_line,) = [line for line in out if line.startswith("full output: ")]
    assert "TASK [" in open(log_line.split()[2]).read()
    assert "TASK [" not in result.stdout


def test_wrong_inventory_path_is_one_line_and_exit_2(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "no-such-inventory.yml"), check=False)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "no-such-inventory.yml does not exist" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_limit_refused_where_every_mac_is_needed(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "inventory.yml"), "--limit", "mini-1", check=False)
    assert result.returncode == 2
    assert "--limit cannot apply to `mlx-fleet hostfile`" in result.stderr


def test_unreachable_mac_is_named_and_exit_4(cluster):
    inventory = cluster.dir / "inventory-extra.yml"
    data = dict(cluster.inventory)
    hosts = dict(data["all"]["children"]["mlx_cluster"]["hosts"])
    # An address on the sim's own management network that no simulated Mac answers.
    silent = cluster.state()["nodes"]["mini-1"]["management_ip"].rsplit(".", 1)[0] + ".250"
    hosts["mini-9"] = {**hosts["mini-1"], "ansible_host": silent}
    data["all"]["children"]["mlx_cluster"]["hosts"] = hosts
    inventory.write_text(yaml.safe_dump(data))
    result = mlx_fleet("checklist", "-i", str(inventory), check=False)
    assert result.returncode == 4, result.stdout + result.stderr
    assert any(line.startswith("unreachable: mini-9: ") for line in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1] == "result: some Macs are unreachable (exit 4)"
