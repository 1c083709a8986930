"""Preflight on simulated Macs: inventory mistakes stop the run before any Mac is touched,
and unfit Macs stop it with a message naming the host and the fix."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import BIN, Sim, logins

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]


def playbook(inventory: Path, *args: str, playbook: str = "playbooks/preflight.yml") -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / playbook), *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


@pytest.fixture(scope="module")
def sim():
    cluster = Sim(nodes=3, topology="mesh")
    yield cluster
    cluster.down()


def inventory_with(sim: Sim, tmp_path: Path, group_vars: dict | None = None, hosts: dict | None = None) -> Path:
    data = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    group = data["all"]["children"]["mlx_cluster"]
    group["vars"].update(group_vars or {})
    for name, host_vars in (hosts or {}).items():
        group["hosts"].setdefault(name, {}).update(host_vars)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_sound_cluster_passes(sim, tmp_path):
    result = playbook(sim.dir / "inventory.yml", "-v")
    assert result.returncode == 0, result.stdout
    # Each Mac's line: its model and chip, its macOS, how sudo goes.
    mini_1 = re.split(r'\\n|\n|"', result.stdout[result.stdout.index("mini-1: Mac mini "):])[0]  # -v: a JSON msg
    assert all(value in mini_1 for value in ("(Apple M4 Pro)", "26.2 (25C56)", "passwordless")), result.stdout


@pytest.mark.parametrize(
    ("group_vars", "hosts", "line"),
    [
        ({}, {"mini-4": {"ansible_host": "mini-1"}},
         "inventory: mini-1 and mini-4: the same address mini-1 twice; each Mac needs its own ansible_host"),
        ({}, {"mini-2": {"mlx_fleet_model": "mini-m5"}},
         "inventory: mini-2: unknown model 'mini-m5' in mlx_fleet_model; did you mean mini-m4, mini-m2, mini-m1? "
         "Or leave it out: the Mac's own facts are read"),
        ({"mlx_fleet_backend": "nccl"}, {},
         "inventory: mlx_fleet_backend: unknown backend 'nccl'; use one of jaccl, jaccl-ring, ring, auto"),
        ({"mlx_fleet_min_macos": "26.x"}, {},
         "inventory: mlx_fleet_min_macos: malformed version '26.x'; write it like 26.2 or 0.32.4 (quoted in YAML)"),
        ({"mlx_fleet_cables": ["mini-1:1 -- mini-9:1"]}, {},
         "inventory: mlx_fleet_cables: cable mini-1:1 -- mini-9:1: unknown host 'mini-9'"),
        ({"mlx_fleet_cables": ["mini-1:1 -- mini-2:5"]}, {},
         "inventory: mlx_fleet_cables: cable mini-1:1 -- mini-2:5: mini-2 has Thunderbolt ports 1-3, not 5"),
        ({"mlx_fleet_cables": ["mini-1:1 -- mini-2:1", "mini-1:1 -- mini-3:1"]}, {},
         "inventory: mlx_fleet_cables: cable mini-1:1 -- mini-3:1: port mini-1:1 is already used by cable "
         "mini-1:1 -- mini-2:1"),
        ({"mlx_fleet_ip_pool": "10.213.0.0/16", "mlx_fleet_management_network": "10.213.0.0/16"}, {},
         "inventory: mlx_fleet_ip_pool: 10.213.0.0/16 overlaps the management network 10.213.0.0/16; "
         "pick a pool the Macs do not already use"),
    ],
    ids=["duplicate-address", "unknown-model", "unknown-backend", "malformed-version", "cable-unknown-host",
         "cable-unknown-port", "port-used-twice", "pool-overlaps-management"],
)
def test_inventory_mistake_stops_before_any_mac_is_touched(sim, tmp_path, group_vars, hosts, line):
    before = logins(sim)
    result = playbook(inventory_with(sim, tmp_path, group_vars, hosts), playbook="site.yml")
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert line in output.splitlines() or f"[ERROR]: Task failed: {line}" in output.splitlines(), output
    assert logins(sim) == before, "a Mac was contacted despite the inventory error"


def test_a_host_outside_the_cluster_and_an_extra_variable_are_named_as_such(sim, tmp_path):
    inventory = inventory_with(sim, tmp_path, {"mlx_fleet_cables": ["mini-1:1 -- buildbox:1"]})
    data = yaml.safe_load(inventory.read_text())
    data["all"]["hosts"] = {"buildbox": {"ansible_host": "192.0.2.7"}}  # in the inventory, not in mlx_cluster
    inventory.write_text(yaml.safe_dump(data))
    before = logins(sim)
    result = playbook(inventory, "-e", "mlx_fleet_ip_pool=10.0.0.1/8", playbook="site.yml")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    # The cable's line names the host and the group it is not in; the -e line the pool and the network meant.
    (cable,) = [line for line in lines if line.startswith("[ERROR]: ") and "mini-1:1 -- buildbox:1:" in line]
    assert {"mlx_fleet_cables:", "mlx_cluster;"} <= set(cable.split()), result.stdout
    (pool,) = [line for line in lines if line.startswith("extra variable (-e): ")]
    assert "10.0.0.1/8" in pool.split() and pool.endswith(" 10.0.0.0/8"), result.stdout
    assert logins(sim) == before


def test_a_pool_on_the_controllers_own_network_is_refused(sim, tmp_path):
    # The controller reaches the simulated Macs over its bridge, 10.213.K.1/24.
    before = logins(sim)
    result = playbook(inventory_with(sim, tmp_path, {"mlx_fleet_ip_pool": "10.213.0.0/16"}))
    assert result.returncode == 2
    k = sim.state()["index"]
    line = next(line for line in result.stdout.splitlines() if "overlaps this controller's network" in line)
    assert line.startswith("[ERROR]: ") and {"mlx_fleet_ip_pool:", "10.213.0.0/16"} <= set(line.split()), result.stdout
    assert f"10.213.{k}.0/24 (mfs{k}br 10.213.{k}.1)" in line
    assert logins(sim) == before


def test_unfit_macs_are_named_with_the_fix(make_sim, tmp_path):
    sim = make_sim(nodes=4, topology="line")
    sim.cli("set", "mini-1", "os_version=26.1", "os_build=25B78")
    sim.cli("set", "mini-2", "apple_silicon=false", "chip=Intel Core i7", "model_id=Macmini8,1")
    sim.cli("set", "mini-3", "sudo=none")
    sim.cli("set", "mini-4", "sudo=password")
    result = playbook(sim.dir / "inventory.yml")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    for expected in (
        "[ERROR]: Task failed: mini-1: macOS 26.1 (25B78) is older than mlx_fleet_min_macos 26.2; "
        "update it in System Settings > General > Software Update",
        "[ERROR]: Task failed: mini-2: Mac mini (Macmini8,1) is not Apple Silicon; MLX distributed needs an "
        "M-series Mac: remove it from mlx_cluster",
        "[ERROR]: Task failed: mini-3: admin is not an administrator, so it cannot sudo; connect as an admin "
        "account (ansible_user) or tick 'Allow this user to administer this computer' in Users & Groups",
        "[ERROR]: Task failed: mini-4: sudo asks admin for a password; run with --ask-become-pass (-K) or set "
        "ansible_become_password in a vault",
    ):
        assert expected in lines, result.stdout


def test_password_sudo_passes_with_a_become_password(make_sim, tmp_path):
    sim = make_sim(nodes=2, topology="line")
    sim.cli("set", "mini-1", "sudo=password")
    secret = tmp_path / "become.yml"
    secret.write_text(yaml.safe_dump({"ansible_become_password": (sim.dir / "admin_password").read_text().strip()}))
    result = playbook(sim.dir / "inventory.yml", "-v", "-e", f"@{secret}")
    assert result.returncode == 0, result.stdout
    assert "sudo password" in result.stdout
