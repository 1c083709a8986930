"""Safe on a real rack, on one simulated 3-Mac mesh: a bad inventory stops every command before any
login; two runs at once never mix; a Mac that fails its network step, or stops answering, leaves the
last good hostfiles in place, and the one that stopped answering is named (its wait bounded by the
connection timeouts; how long it takes is `make bench`'s to measure)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.runlock import run_lock
from simlib import BIN, Sim, digests, logins

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
GOOD_RUN = "good-run"  # the cluster's snapshot after its one good run
HOLDER = "a run the test holds"


def run(argv: list[str], env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"} | (env or {})
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd="/",
                          stdin=subprocess.DEVNULL)


def hostfile(inventory: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"} | (env or {})  # the packaged config
    return subprocess.run([str(BIN / "mlx-fleet"), "hostfile", "-i", str(inventory)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd="/", stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def cluster():
    """A 3-Mac mesh with the hostfiles of one good run in the default output folder."""
    sim = Sim(nodes=3, topology="mesh")
    first = hostfile(sim.dir / "inventory.yml")
    assert first.returncode == 0, first.stdout + first.stderr
    sim.cli("snapshot", GOOD_RUN)
    yield sim, sim.dir / ".mlx-fleet"
    sim.down()


def inventory_with(sim: Sim, path: Path, group_vars: dict, hosts: dict) -> Path:
    data = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    group = data["all"]["children"]["mlx_cluster"]
    group["vars"].update(group_vars)
    for name, host_vars in hosts.items():
        group["hosts"].setdefault(name, {}).update(host_vars)
    path.mkdir(exist_ok=True)
    (path / "inventory.yml").write_text(yaml.safe_dump(data, allow_unicode=True))
    return path / "inventory.yml"


@pytest.mark.parametrize(
    ("command", "group_vars", "hosts", "line"),
    [
        ("hostfile", {"mlx_fleet_ip_pool": "192.168.1.5/16"}, {},
         "mlx_fleet_ip_pool: 192.168.1.5/16 has host bits set; write the network itself, 192.168.0.0/16"),
        ("hostfile", {"mlx_fleet_min_macos": 26.1}, {},
         'mlx_fleet_min_macos: 26.1 is a number in YAML, which reads 26.10 as 26.1; quote the version as you mean '
         'it, e.g. mlx_fleet_min_macos: "26.2"'),
        ("hostfile", {}, {"../../etc": {"ansible_host": "10.0.0.99"}},
         "'../../etc': not a valid host name; name each Mac with letters, digits and hyphens (dots only between "
         "labels), e.g. studio-1"),
        ("hostfile", {"mlx_fleet_ip_pool": "192.168.7.0/30",
                      "mlx_fleet_cables": ["mini-1:1 -- mini-2:1", "mini-1:2 -- mini-3:1", "mini-2:2 -- mini-3:2"]}, {},
         "mlx_fleet_ip_pool: 192.168.7.0/30 holds 1 /30 networks for 3 planned cables; use a larger pool (at least /28)"),
        ("checklist", {}, {"mini-2": {"mlx_fleet_model": ["mini-m4-pro"]}},
         "mini-2: mlx_fleet_model is a list; give one model key, e.g. mlx_fleet_model: studio-m3-ultra"),
        ("site.yml", {"mlx_fleet_cables": ["mini-1:1 -- mïni-2:1"]}, {},
         "mlx_fleet_cables: cable mini-1:1 -- mïni-2:1: unknown host 'mïni-2'"),
    ],
    ids=["pool-host-bits", "version-number", "host-name-path", "pool-too-small", "model-list", "unicode-cable-host"],
)
def test_a_bad_inventory_stops_before_any_login(cluster, tmp_path, command, group_vars, hosts, line):
    sim, _ = cluster
    inventory = inventory_with(sim, tmp_path / "inv", group_vars, hosts)
    before = logins(sim)
    if command == "site.yml":
        result = run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "site.yml")])
        lines = [text.removeprefix("[ERROR]: Task failed: ") for text in result.stdout.splitlines()]
    else:
        result = run([str(BIN / "mlx-fleet"), command, "-i", str(inventory)])
        lines = [text.removeprefix("error: ") for text in result.stdout.splitlines()]
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"inventory: {line}" in lines, result.stdout
    assert logins(sim) == before, "a Mac was contacted despite the inventory error"


def test_two_runs_at_once_never_mix(cluster):
    # The test holds the folder's run lock as a run does; a second command on it waits its 1 s, then
    # refuses in one line naming the holder, exit 3, and writes nothing.
    sim, out = cluster
    before = digests(out)
    with run_lock(out, HOLDER) as held:
        second = hostfile(sim.dir / "inventory.yml", env={"MLX_FLEET_LOCK_WAIT": "1"})
    assert second.returncode == 3, second.stdout + second.stderr
    (refusal,) = second.stderr.splitlines()  # one line, naming the holder: what, its pid, since when, the folder
    assert all(part in refusal for part in (HOLDER, f"pid {os.getpid()}", held["started"], str(out))), refusal
    assert digests(out) == before


def test_a_mac_failing_its_network_step_keeps_the_last_hostfiles(cluster):
    sim, out = cluster
    before = digests(out)
    sim.cli("set", "mini-2", "sudo=password")  # its network step cannot sudo
    try:
        # As in site.yml, after a preflight mini-2 passed before its sudo broke.
        result = run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), "-e",
                      f"mlx_fleet_output_dir={out}", str(REPO / "tests/sim/playbooks/read_macs.yml"),
                      str(REPO / "playbooks/thunderbolt.yml")])
    finally:
        sim.cli("set", "mini-2", "sudo=nopasswd")
    assert result.returncode != 0
    assert ("[ERROR]: Task failed: hostfiles not rewritten: mini-2 failed or did not answer earlier in this run; "
            "the last good hostfiles stay on the controller and the Macs: fix it and run again"
            in result.stdout.splitlines()), result.stdout
    assert digests(out) == before
    for node in sim.nodes:  # through the sim, not a plain `ssh NODE`: another cluster may share the names
        on_mac = sim.cli("exec", node, "--", "cat", "/opt/mlx-fleet/hostfile.json").stdout
        assert on_mac == (out / "hostfile.json").read_text()


def test_a_mac_that_stops_answering_fails_alone_and_quickly(cluster):
    sim, out = cluster
    before = digests(out)
    sim.cli("exec", "mini-3", "--", "ip", "link", "set", "en0", "down")
    try:
        result = hostfile(sim.dir / "inventory.yml", timeout=150)  # a bound so the test cannot hang
        kept = digests(out)
    finally:
        sim.cli("restore", GOOD_RUN)  # mini-3 back, for the tests after this one
    assert result.returncode == 4, result.stdout + result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("unreachable: ")][0].startswith(
        "unreachable: mini-3: "), result.stdout
    assert kept == before
