"""mlx-fleet onboard on the sim: a fourth Mac Studio, fresh from Setup Assistant, joins a converged mesh.

One converged 3-Studio mesh for the module (converging takes minutes); the refusals run first against
the same new Mac, then the onboarding itself, then the Recovery step and site.yml twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from simlib import BIN, MLX_FLEET, Sim, cable_networks, changed_per_host, mlx_fleet, run_recorded

from mlx_fleet.sim.access import environment_vars

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
# Our lab cluster: three Mac Studios in a Thunderbolt 5 mesh.
all:
  children:
    mlx_cluster:
      hosts:
        studio-1:
          mlx_fleet_model: studio-m3-ultra   # the first one we bought
          mlx_fleet_location: Rack A, shelf 1
        studio-2:
          mlx_fleet_model: studio-m3-ultra
          mlx_fleet_location: Rack A, shelf 2
        studio-3:
          mlx_fleet_model: studio-m3-ultra
          mlx_fleet_location: Rack A, shelf 3
      vars:
        ansible_user: admin
        ansible_python_interpreter: /usr/bin/python3
        ansible_ssh_common_args: -F {dir}/ssh_config
        ansible_control_path_dir: {dir}/cp
{env}        # auto: what mlx.distributed_config would choose
        mlx_fleet_backend: auto
        mlx_fleet_cables:
          - studio-1:2 -- studio-2:2
          - studio-1:3 -- studio-3:2   # the short cable
          - studio-2:3 -- studio-3:3
"""
# What the sim's Macs can install (Linux wheels, their own Python, the sim's lock), as sim up writes it.
SIM_ENV = "".join(f"        {key}: {json.dumps(value)}\n" for key, value in environment_vars().items())
OLD = ("studio-1", "studio-2", "studio-3")
# The old cables' ports as the Macs' own tools show them.
OLD_PORTS = 'for s in "Thunderbolt 2" "Thunderbolt 3"; do networksetup -getinfo "$s"; done'


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=3, model="studio-m3-ultra", topology="mesh")
    folder = sim.dir / "mine"
    folder.mkdir()
    inventory = folder / "hosts.yml"
    # What the sim's Macs can install (Linux wheels, their own Python, the sim's lock), as sim up writes it.
    inventory.write_text(INVENTORY.format(dir=sim.dir, env=SIM_ENV))
    mlx_fleet("converge", "-i", str(inventory), timeout=900)
    added = sim.cli("add", "studio-4", "--model", "studio-m3-ultra").stdout
    yield sim, inventory, re.search(r"host key: (SHA256:\S+)", added).group(1)
    sim.down()


def _address(sim) -> str:
    return sim.state()["nodes"]["studio-4"]["management_ip"]


def _onboard(sim, inventory: Path, *args: str) -> list[str]:
    return [MLX_FLEET, "onboard", "-i", str(inventory), "studio-4", "--address", _address(sim), *args]


def _factory_state(sim, inventory: Path) -> tuple:
    home = sim.cli("exec", "studio-4", "--", "ls", "-a", "/Users/admin", "/etc/sudoers.d").stdout
    return home, inventory.read_text(), (sim.dir / "known_hosts").read_text()


def test_a_wrong_fingerprint_or_password_changes_nothing(cluster, tmp_path):
    sim, inventory, fingerprint = cluster
    before = _factory_state(sim, inventory)
    assert ".ssh" not in before[0] and "mlx-fleet-admin" not in before[0]
    argv = _onboard(sim, inventory)
    wrong_key = subprocess.run(argv + ["--host-key-fingerprint", "SHA256:" + "A" * 43, "--password-file",
                                       str(sim.dir / "nodes" / "studio-4" / "admin-password")],
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert wrong_key.returncode == 2 and wrong_key.stderr.count("\n") == 1, wrong_key.stderr
    assert f"the host key of {_address(sim)} is {fingerprint}, not the SHA256:AAAA" in wrong_key.stderr
    assert "refused before any password was sent" in wrong_key.stderr

    password = tmp_path / "wrong"
    password.write_text("not-the-password\n")
    password.chmod(0o600)  # else refused for its mode before any contact
    wrong_password = subprocess.run(argv + ["--host-key-fingerprint", fingerprint, "--password-file", str(password)],
                                    capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert wrong_password.returncode == 2 and wrong_password.stderr.count("\n") == 1, wrong_password.stderr
    assert "refused the password; nothing was changed on the Mac or in the inventory" in wrong_password.stderr
    assert "not-the-password" not in wrong_password.stdout + wrong_password.stderr
    assert _factory_state(sim, inventory) == before


def _job_events(run: Path) -> list[dict]:
    return [json.loads(f.read_text())["event_data"] | {"event": json.loads(f.read_text())["event"]}
            for f in sorted((run / "job_events").glob("*.json"))]


def test_a_fourth_studio_joins_the_mesh(cluster):
    sim, inventory, fingerprint = cluster
    out = inventory.parent / ".mlx-fleet"
    old_addresses = cable_networks(out)
    old_ports = {n: sim.ssh(n, OLD_PORTS).stdout for n in OLD}
    argv = _onboard(sim, inventory) + ["--host-key-fingerprint", fingerprint, "--password-file",
             str(sim.dir / "nodes" / "studio-4" / "admin-password"), "--passwordless-sudo",
             "--location", "Rack A, shelf 4", "--wait-for-cables", "--cable-timeout", "300"]
    started = time.monotonic()
    onboard = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL)
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(onboard.stderr), daemon=True).start()
    lines: list[str] = []

    def until(pattern: str) -> re.Match:
        while True:
            line = onboard.stdout.readline()
            assert line, f"onboard ended before {pattern!r}:\n{''.join(lines)}{''.join(stderr)[-3000:]}"
            lines.append(line)
            if match := re.search(pattern, line):
                return match

    until(r"^visit sheet: ")
    steps = re.findall(r"^  \d\. connect studio-4 Thunderbolt (\d) to (studio-\d) Thunderbolt (\d)$", "".join(lines), re.M)
    # Three cables, one to each Studio, each on free ports that carry RDMA (Thunderbolt 1 does not;
    # the mesh uses 2 and 3 of every old Studio).
    assert sorted(peer for _, peer, _ in steps) == list(OLD), lines
    assert all(int(mine) != 1 and int(theirs) not in (1, 2, 3) for mine, _, theirs in steps), steps
    assert len({mine for mine, _, _ in steps}) == 3

    # A cable in a wrong port first: the wait names the move that fixes it.
    wrong = next(p for p in range(2, 7) if str(p) not in {mine for mine, _, _ in steps})
    first = steps[0]
    sim.cli("plug", f"studio-4:{wrong}", f"{first[1]}:{first[2]}")
    until(rf"wrong port: .* move the cable in studio-4 Thunderbolt {wrong} to Thunderbolt {first[0]}$")
    sim.cli("unplug", f"studio-4:{wrong}")
    for mine, peer, theirs in steps:
        sim.cli("plug", f"studio-4:{mine}", f"{peer}:{theirs}")
    until(r"^cables: 3/3 in$")
    rest, _ = onboard.communicate(timeout=900)
    elapsed = time.monotonic() - started
    lines.append(rest)
    output = "".join(lines)
    assert onboard.returncode == 0, output + "".join(stderr)[-3000:]
    assert "result: ok" in output

    # The inventory: the Mac and its cables added, everything else as it was.
    added = "".join(f"          - {peer}:{theirs} -- studio-4:{mine}\n" for mine, peer, theirs in steps)
    assert inventory.read_text() == INVENTORY.format(dir=sim.dir, env=SIM_ENV).replace(
        "      vars:\n", "        studio-4:\n          mlx_fleet_model: studio-m3-ultra\n"
                      "          mlx_fleet_location: Rack A, shelf 4\n      vars:\n") + added

    hostfile = json.loads((out / "hostfile.json").read_text())
    assert [h["ssh"] for h in hostfile["hosts"]] == [*OLD, "studio-4"]
    addresses = cable_networks(out)
    assert {c: addresses[c] for c in old_addresses} == old_addresses and len(addresses) == 6

    # The old Macs: only their new port configured (and the hostfiles pushed); the old ports as they were.
    run = max((p for p in (out / "runs").iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    events = [e for e in _job_events(run) if e["event"] == "runner_on_ok" and e["res"].get("changed")]
    on_macs = {(e["host"], e["task_action"]) for e in events if e["host"] in OLD
               and e["task_action"] not in ("mlx_fleet.cluster.fabric", "mlx_fleet.cluster.fabric_publish",
                                            "mlx_fleet.cluster.rdma_readiness")}  # the controller's steps
    assert {action for _, action in on_macs} == {"mlx_fleet.cluster.thunderbolt_network", "mlx_fleet.cluster.hostfiles"}
    new_port = {peer: theirs for _, peer, theirs in steps}
    for event in events:
        if event["host"] in OLD and event["task_action"] == "mlx_fleet.cluster.thunderbolt_network":
            # A new service goes where macOS puts it; the step then orders the Thunderbolt services last again.
            order = [command[1:] for command in event["res"]["commands"] if command[0] == "-ordernetworkservices"]
            services = {command[1] for command in event["res"]["commands"] if command[0] != "-ordernetworkservices"}
            assert services == {f"Thunderbolt {new_port[event['host']]}"}, event["res"]["commands"]
            for names in order:
                thunderbolt = [i for i, name in enumerate(names) if name.startswith("Thunderbolt")]
                assert thunderbolt == list(range(len(names) - len(thunderbolt), len(names))), names
    assert {n: sim.ssh(n, OLD_PORTS).stdout for n in OLD} == old_ports

    # The drop-in as visudo checked it, root:wheel 0440; the password nowhere in what the runs kept.
    assert sim.cli("exec", "studio-4", "--", "stat", "-c", "%a %u %g", "/etc/sudoers.d/mlx-fleet-admin").stdout == "440 0 0\n"
    secret = (sim.dir / "nodes" / "studio-4" / "admin-password").read_text().strip()
    assert not [p for p in out.rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]

    sheet = (out / "onboard-studio-4.txt").read_text()
    assert "ENABLE RDMA IN macOS RECOVERY, AT studio-4" in sheet
    for mine, peer, theirs in steps:
        assert f"Connect studio-4 Thunderbolt {mine} to {peer} Thunderbolt {theirs}" in sheet
    took = re.search(r"onboarding of studio-4 took \d+ s", output).group(0)
    print(f"\nonboarding studio-4 on the sim: {elapsed:.0f} s wall time, the test's cabling included ({took})")

    # The person does the Recovery step; site.yml then writes a 4-host jaccl hostfile, and again changes nothing.
    sim.cli("recovery", "studio-4", "--", "rdma_ctl", "enable")
    sim.cli("reboot", "studio-4")
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    for attempt in ("after Recovery", "again"):
        site = run_recorded([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "site.yml")],
                            env, timeout=900, stdin=subprocess.DEVNULL)
        assert site.returncode == 0, f"{attempt}: {site.stdout[-4000:]}"
    hostfile = json.loads((out / "hostfile.json").read_text())
    assert hostfile["backend"] == "jaccl" and len(hostfile["hosts"]) == 4
    assert changed_per_host(site) == {"localhost": 0, **dict.fromkeys([*OLD, "studio-4"], 0)}, site.stdout[-3000:]
