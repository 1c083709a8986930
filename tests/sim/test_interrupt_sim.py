"""Interrupted runs and secrets on the controller, end to end through the CLI on one simulated 2-Mac cluster.

Ctrl-C (typed on the CLI's terminal: SIGINT to its foreground process group) at three points of a fresh converge,
preflight, environment and fabric: exit 130 with one line, no ansible-playbook left, the run lock free;
then a converge succeeds and a second one changes nothing. Then a third Mac, fresh from Setup Assistant
(its own admin password, sudo asking for it), is onboarded with --password-file and the cluster
converged with -K (that Mac's password; the others need none), each run killed mid-way by SIGTERM and
by SIGKILL: the password is never in a file the controller keeps (temporary folders, the output folder
with runs/, ~/.ansible, the inventory's folder) nor in `ps` output taken during the runs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pexpect
import pytest
import yaml

from simlib import CALLBACKS, ENV_CACHE, MLX_FLEET, Ps, Sim

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock

pytestmark = pytest.mark.sim
AT = {"preflight": "Read the Mac and its Thunderbolt ports through their own tools",
      "environment": "Send what the node lacks as one bundle, install the locked set offline and prove MLX runs",
      "fabric": "Give each cabled port its network"}
LEFT_WAIT = 10  # seconds after the CLI ended by which no ansible-playbook of its run may be left


class Cluster:
    def __init__(self, sim: Sim):
        self.sim = sim
        # The inventory in a folder of its own: the sim's folder holds the simulated Macs' disks and passwords.
        self.folder = sim.dir / "mine"
        self.folder.mkdir()
        self.inventory = self.folder / "inventory.yml"
        shutil.copy(sim.dir / "inventory.yml", self.inventory)
        self.out = self.folder / ".mlx-fleet"
        self.marker = sim.dir / "at-task"

    def start(self, command: str, *args: str, at: str | None = None) -> pexpect.spawn:
        """The CLI on a terminal of its own (pexpect: a new session, as a shell's job), cwd /."""
        env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
        if at:
            self.marker.unlink(missing_ok=True)
            env |= {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "run_at_task",
                    "MLX_FLEET_AT_TASK": at, "MLX_FLEET_AT_TASK_RUN": shlex.join(["touch", str(self.marker)])}
        return pexpect.spawn(MLX_FLEET, [command, "-i", str(self.inventory), *args], env=env, cwd="/",
                             encoding="utf-8", timeout=600, dimensions=(50, 400))

    def until_task(self, cli: pexpect.spawn) -> None:
        """Read the CLI's terminal until the run reaches the task, then a second more (hosts running it)."""
        while not self.marker.exists():
            assert cli.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.2) == 0, f"ended first:\n{cli.before}"
        cli.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=1)

    def own_playbooks(self) -> list[str]:
        """The ansible-playbook processes of this cluster's runs (other clusters may be converging too)."""
        ps = subprocess.run(["ps", "-e", "-ww", "-o", "pid=,args="], capture_output=True, text=True).stdout
        return [line for line in ps.splitlines() if "ansible-playbook" in line and str(self.folder) in line]

    def playbooks_left(self) -> list[str]:
        deadline = time.monotonic() + LEFT_WAIT
        while (left := self.own_playbooks()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def kill_left(self) -> None:
        """After a SIGKILL of the CLI (nothing it could do): the test stops what the run left."""
        for line in self.own_playbooks():
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def lock_is_free(self) -> bool:
        try:
            with runlock.run_lock(self.out, "the test", wait=0):
                return True
        except runlock.LockBusy:
            return False


def finish(cli: pexpect.spawn) -> tuple[int | None, str]:
    cli.expect(pexpect.EOF, timeout=600)
    text = cli.before
    cli.close()
    return cli.exitstatus, text.replace("\r\n", "\n")


def converge(cluster: Cluster) -> tuple[int, str]:
    result = subprocess.run([MLX_FLEET, "converge", "-i", str(cluster.inventory), "-e", f"mlx_env_cache_dir={ENV_CACHE}"],
                            capture_output=True, text=True, timeout=900, cwd="/", stdin=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"})
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=2, topology="mesh")
    made = Cluster(sim)
    try:
        yield made
    finally:
        made.kill_left()
        sim.down()


@pytest.mark.parametrize("point", list(AT))
def test_ctrl_c_stops_the_run_and_its_workers(cluster, point):
    cli = cluster.start("converge", "-e", f"mlx_env_cache_dir={ENV_CACHE}", at=AT[point])
    cluster.until_task(cli)
    cli.sendintr()  # Ctrl-C typed on its terminal: SIGINT to the terminal's foreground process group
    status, output = finish(cli)
    last = output.strip().splitlines()[-1]
    assert status == 130, output[-3000:]
    mid_change = (r"mlx-fleet converge: interrupted: (mini-\d, )*mini-\d may be mid-change; "
                  r"the next converge repairs them")
    # At the preflight point the Ctrl-C may land while the first read still runs (a slow machine): no Mac
    # was changed then, and the line says so; at the other two points a changing step is under way.
    unchanged = r"mlx-fleet converge: interrupted before any Mac was changed"
    assert re.fullmatch(f"{mid_change}|{unchanged}" if point == "preflight" else mid_change, last), output[-3000:]
    assert "Traceback" not in output
    assert cluster.playbooks_left() == []
    assert cluster.lock_is_free()


def test_after_the_interrupts_a_converge_repairs_and_a_second_changes_nothing(cluster):
    status, output = converge(cluster)
    assert status == 0, output[-4000:]
    status, output = converge(cluster)
    assert status == 0, output[-4000:]
    assert not [line for line in output.splitlines() if line.startswith("changed:")], output[-3000:]


def files_holding(secret: str, cluster: Cluster) -> list[str]:
    """Every file of the controller's temporary folders, the output folder (runs/ included), ~/.ansible
    and the inventory's folder that holds the secret; the simulated Macs' disks and the sims' own files
    (their admin passwords) and the shared download cache are not the controller's."""
    roots = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path.home() / ".ansible", cluster.folder}
    skip = re.compile(r"^/var/tmp/(mlx-fleet-sim-|mlx-fleet-env-cache|mlx-fleet-node-python|mlx-fleet-old-mlx)")
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            if skip.match(folder) and not folder.startswith(str(cluster.folder)):
                dirs[:] = []
                continue
            for name in files:
                path = Path(folder, name)
                try:
                    if path.is_file() and not path.is_symlink() and path.stat().st_size < 50_000_000 \
                            and secret.encode() in path.read_bytes():
                        found.append(str(path))
                except OSError:
                    pass
    return found


@pytest.fixture(scope="module")
def new_mac(cluster):
    sim = cluster.sim
    added = sim.cli("add", "mini-3").stdout
    fingerprint = re.search(r"host key: (SHA256:\S+)", added).group(1)
    address = sim.state()["nodes"]["mini-3"]["management_ip"]
    password_file = sim.dir / "nodes" / "mini-3" / "admin-password"
    return fingerprint, address, password_file, password_file.read_text().strip()


def _onboard(cluster: Cluster, new_mac, at: str | None = None) -> pexpect.spawn:
    fingerprint, address, password_file, _ = new_mac
    return cluster.start("onboard", "mini-3", "--address", address, "--host-key-fingerprint", fingerprint,
                         "--password-file", str(password_file), at=at)


def _converge_k(cluster: Cluster, new_mac) -> pexpect.spawn:
    cli = cluster.start("converge", "-K", "-e", f"mlx_env_cache_dir={ENV_CACHE}", at="Create the venv and store folders")
    cli.expect("BECOME password: ")
    cli.sendline(new_mac[3])
    return cli


@pytest.mark.parametrize("kill", ["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("run", ["onboard --password-file", "converge -K"])
def test_a_killed_run_leaves_the_password_nowhere(cluster, new_mac, run, kill):
    password = new_mac[3]
    if run == "converge -K" and "mini-3" not in cluster.inventory.read_text():
        # The new Mac joins the inventory (its cables are still to plug in: exit 1), its sudo still asking.
        status, output = finish(_onboard(cluster, new_mac))
        assert status == 1 and "inventory: updated" in output, output[-3000:]
        assert yaml.safe_load(cluster.inventory.read_text())["all"]["children"]["mlx_cluster"]["hosts"]["mini-3"]
    with Ps() as ps:
        cli = _onboard(cluster, new_mac, at="Read the Mac through its own tools") if run.startswith("onboard") \
            else _converge_k(cluster, new_mac)
        cluster.until_task(cli)
        os.kill(cli.pid, getattr(signal, kill))
        status, output = finish(cli)
        if kill == "SIGTERM":
            assert status == 130, output[-3000:]
            assert output.strip().splitlines()[-1].startswith(f"mlx-fleet {run.split()[0]}: interrupted"), output
            assert cluster.playbooks_left() == []
        else:
            cluster.kill_left()
    assert password not in output
    assert [snapshot for snapshot in ps.seen if password in snapshot] == []
    assert len(ps.seen) > 4  # ps did run during the run
    assert files_holding(password, cluster) == []
