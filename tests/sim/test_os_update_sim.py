"""mlx-fleet os-update on a 4-Mac sim on 26.2 (25C56) offered 26.5.2 (25F84), one cluster for every case:
--check, a running job refused before any change, a fault stopping the run at its Mac (the Macs after it
untouched, a visit sheet), the rerun after the fault is cleared resuming without updating a Mac twice, a
no-op rerun, and the password never in a process list or a file. Then the other faults on further updates."""

from __future__ import annotations

import json
import os
import re

import yaml
import subprocess
import threading
import time
from pathlib import Path

from simlib import BIN, REPO, command_lines, mlx_fleet

ENV_CACHE = "/var/tmp/mlx-fleet-env-cache"  # the warm download cache the env tests share
AUTO_INSTALL = ("defaults", "write", "/Library/Preferences/com.apple.SoftwareUpdate", "AutomaticallyInstallMacOSUpdates")

SHORT = ("--poll", "0.5", "--timeout", "20")  # the sim prepares in a second; a Mac takes minutes


NAMES = ["ou-1", "ou-2", "ou-3", "ou-4"]  # names of their own: verify reaches Macs by plain ssh NAME
MESH = ["ou-1:1 -- ou-2:1", "ou-1:2 -- ou-3:1", "ou-1:3 -- ou-4:1", "ou-2:2 -- ou-3:2", "ou-2:3 -- ou-4:2",
        "ou-3:3 -- ou-4:3"]


def four_macs(make_sim, folder: Path, **up_args):
    """Four M4 Pro Mac minis on 26.2 (25C56) in a full mesh; ou-1 is rank 0."""
    plan = folder / "plan.yml"
    plan.write_text(yaml.safe_dump({"nodes": {n: {"model": "mini-m4-pro"} for n in NAMES}, "cables": MESH}))
    return make_sim(topology=str(plan), **up_args)


def builds(sim) -> dict[str, str]:
    return {n: sim.profile(n)["os_build"] for n in sim.nodes}


def restarts(sim) -> list[str]:
    log = sim.dir / "power-agent.log"
    return re.findall(r"^(\S+): restarted into", log.read_text(), re.M) if log.exists() else []


class ProcessWatch(threading.Thread):
    """Every command line on this machine (the simulated Macs' processes included) while the update runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seen: set[str] = set()
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.seen.update(command_lines())
            self.stop.wait(0.1)


def held_on(sim, node: str) -> str | None:
    path = sim.dir / "nodes" / node / "fs/opt/mlx-fleet/hostfile.held"
    return path.read_text() if path.exists() else None


def hostfile_on(sim, node: str) -> bytes:
    return (sim.dir / "nodes" / node / "fs/opt/mlx-fleet/hostfile.json").read_bytes()


def converge(sim) -> tuple[float, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), "-e",
                             f"mlx_env_cache_dir={ENV_CACHE}", str(REPO / "site.yml")], capture_output=True, text=True,
                            timeout=1200, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-4000:]
    return time.monotonic() - started, result.stdout


def os_update(sim, password_file: Path, *extra: str):
    return mlx_fleet("os-update", "-i", str(sim.dir / "inventory.yml"), "--password-file", str(password_file),
                     *SHORT, *extra, check=False, timeout=300)


def test_os_update_canary_first_rank0_last_stops_at_a_fault_and_resumes(make_sim, tmp_path):
    # RDMA on ou-3 only: the cluster runs the ring backend, which verify can run on the sim (no RDMA data path),
    # and ou-3's RDMA is what the update must keep.
    sim = four_macs(make_sim, tmp_path, rdma="ou-3")
    took, _ = converge(sim)  # the environment, the fabric and automatic macOS installs off, on 26.2 (25C56)
    print(f"\nconverge on 26.2: {took:.0f} s")
    password = (sim.dir / "admin_password").read_text().strip()
    password_file = tmp_path / "owner-password"
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)  # else refused for its mode
    sim.cli("offer", "--macos-version", "26.5.2", "--macos-build", "25F84", "--prepare-seconds", "1",
            "--fault", "ou-3=rdma-off")

    check = mlx_fleet("os-update", "-i", str(sim.dir / "inventory.yml"), "--check")
    assert "target: macOS 26.5.2 (25F84)" in check.stdout
    assert "order: ou-2 -> ou-3 -> ou-4 -> ou-1" in check.stdout  # canary not rank 0; rank 0 last
    assert "offered: macOS Tahoe 26.5.2-25F84 (26.5.2, 25F84)" in check.stdout

    # A job from the cluster's environment on ou-4: refused before any Mac changes, naming it.
    sim.ssh("ou-4", "nohup /opt/mlx-fleet/venv/bin/python -c 'import time; time.sleep(300)' >/dev/null 2>&1 &",
            own_config=True)
    refused = os_update(sim, password_file)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert re.search(r"refused: ou-4: an MLX job is running \(pid (\d+)", refused.stderr), refused.stderr
    assert set(builds(sim).values()) == {"25C56"} and restarts(sim) == []
    pid = re.search(r"pid (\d+)", refused.stderr).group(1)
    sim.cli("exec", "ou-4", "--", "kill", pid)

    watch = ProcessWatch()
    watch.start()
    started = time.monotonic()
    try:
        stopped = os_update(sim, password_file)
    finally:
        watch.stop.set()
        watch.join()
    out = stopped.stdout
    assert stopped.returncode == 1, out + stopped.stderr
    update_record = json.loads((sim.dir / ".mlx-fleet" / "os-update.json").read_text())
    assert update_record["macs"]["ou-2"]["status"] == "done" and update_record["macs"]["ou-2"]["after"]["build"] == "25F84"
    assert update_record["macs"]["ou-3"]["status"] == "failed"  # its RDMA: the visit sheet says rdma_ctl enable
    assert "untouched: ou-4, ou-1" in out
    sheet = Path(re.search(r"visit sheet: (\S+)", out).group(1))
    assert "rdma_ctl enable" in sheet.read_text()
    held = mlx_fleet("verify", "-i", str(sim.dir / "inventory.yml"), check=False)  # builds differ: held
    assert held.returncode == 2 and held.stderr.strip().splitlines()[-1].startswith(
        "mlx-fleet verify: the cluster is held: the macOS update to 26.5.2 (25F84) is unfinished (done: ou-2; "
        "to do: ou-1, ou-3, ou-4)"), held.stderr
    assert builds(sim) == {"ou-1": "25C56", "ou-2": "25F84", "ou-3": "25F84", "ou-4": "25C56"}
    assert restarts(sim) == ["ou-2", "ou-3"]
    # The hostfiles say so: hostfile.held beside them on the controller and every Mac (hostfile.json, which
    # mlx.launch reads, stays as it was), and the hostfile step publishes none while held.
    line = "held: os-update in progress (1 of 4 Macs on 25F84, macOS 26.5.2; "
    assert line in out
    assert (sim.dir / ".mlx-fleet" / "hostfile.held").read_text().startswith(line)
    assert all((held_on(sim, n) or "").startswith("held: os-update in progress (every Mac going on 25F84")
               for n in NAMES)  # since the update started
    hostfiles = {n: hostfile_on(sim, n) for n in NAMES}
    republish = mlx_fleet("hostfile", "-i", str(sim.dir / "inventory.yml"), check=False, timeout=600)
    assert f"warning: {line}" in republish.stdout + republish.stderr, republish.stdout + republish.stderr
    assert {n: hostfile_on(sim, n) for n in NAMES} == hostfiles
    assert all(held_on(sim, n).startswith(line) for n in NAMES)  # as the hostfile step says it now

    # The person does the Recovery step; the rerun resumes at ou-3 and installs nothing twice.
    sim.cli("recovery", "ou-3", "--", "rdma_ctl", "enable")
    sim.cli("reboot", "ou-3")
    resumed = os_update(sim, password_file)
    print(f"os-update of 4 Macs (stopped at ou-3, cleared, resumed): {time.monotonic() - started:.0f} s "
          "with 1 s preparations and 0.5 s polls")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    update_record = json.loads((sim.dir / ".mlx-fleet" / "os-update.json").read_text())
    assert update_record["plan"]["order"] == ["ou-3", "ou-4", "ou-1"] and "finished_at" in update_record
    assert {name: mac["status"] for name, mac in update_record["macs"].items()} == dict.fromkeys(NAMES, "done")
    assert set(builds(sim).values()) == {"25F84"}
    assert restarts(sim) == ["ou-2", "ou-3", "ou-4", "ou-1"]  # each Mac once, rank 0 last
    assert "held:" not in resumed.stdout and not (sim.dir / ".mlx-fleet" / "hostfile.held").exists()
    assert [held_on(sim, n) for n in NAMES] == [None] * 4  # released

    again = os_update(sim, password_file)
    assert again.returncode == 0 and "order: nothing to do" in again.stdout, again.stdout + again.stderr
    assert restarts(sim) == ["ou-2", "ou-3", "ou-4", "ou-1"]

    # The cluster is as converged: a converge changes nothing; the audit reports automatic installs turned back on.
    started = time.monotonic()
    noop = mlx_fleet("converge", "-i", str(sim.dir / "inventory.yml"), "-e", f"mlx_env_cache_dir={ENV_CACHE}",
                     timeout=900)
    print(f"converge on 26.5.2 (no-op): {time.monotonic() - started:.0f} s")
    # No Mac changes (the RDMA ledger on the controller notes the new build: a cluster step, not a Mac's change).
    assert "changed:" not in noop.stdout and "result: ok" in noop.stdout, noop.stdout
    # Small messages only: what is checked is that the updated cluster runs, not its figures (the default sizes
    # up to 256 MiB on every one of the mesh's cables take a minute on the sim).
    verify = mlx_fleet("verify", "-i", str(sim.dir / "inventory.yml"), "--sizes", "1KiB", check=False, timeout=600)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    record = mlx_fleet("record", "-i", str(sim.dir / "inventory.yml"))
    record_json = Path(re.search(r"^record: (\S+) ", record.stdout, re.M).group(1))
    last_update = json.loads(record_json.read_text())["macos_update"]
    assert last_update["target"] == {"version": "26.5.2", "build": "25F84"} and last_update["finished_at"]
    sim.cli("exec", "ou-2", "--", *AUTO_INSTALL, "-bool", "true")
    audit = mlx_fleet("audit", "-i", str(sim.dir / "inventory.yml"), check=False)
    findings = json.loads((sim.dir / ".mlx-fleet" / "audit.json").read_text())["findings"]
    assert audit.returncode == 1, audit.stdout
    assert ("automatic macOS installs", ["ou-2"], "off", "on") in [(f["fact"], f["macs"], f["expected"], f["found"])
                                                                   for f in findings], audit.stdout

    # The password was in no command line on the controller or the Macs, and is in no file of theirs.
    assert watch.seen and not [line for line in watch.seen if password in line]
    searched = [sim.dir / ".mlx-fleet", sim.dir / "nodes", Path("/tmp"), Path("/var/tmp")]
    # The pattern from the password file, not the command line: another run of this test on the machine (the
    # sims share one admin password) watches every command line while its update runs.
    found = subprocess.run(["grep", "-rlsF", "--exclude=admin_password", "-f", str(password_file), "--",
                            *map(str, searched)], capture_output=True, text=True).stdout.split()
    # (pytest's own folders excepted: this test's password files, and other tests' files holding the sims' shared
    # admin password, this session's or an earlier one's; mlx-fleet writes nothing there)
    tests_own = tmp_path.parent.parent  # /tmp/pytest-of-USER
    assert [f for f in found if not Path(f).is_relative_to(tests_own) and "/etc/shadow" not in f] == []


def test_each_fault_stops_at_its_mac_and_a_rerun_after_clearing_it_finishes(make_sim, tmp_path):
    sim = four_macs(make_sim, tmp_path)
    password_file = tmp_path / "owner-password"
    password_file.write_text((sim.dir / "admin_password").read_text())
    password_file.chmod(0o600)
    offer = ("offer", "--macos-version", "26.5.2", "--macos-build", "25F84", "--prepare-seconds", "1")
    cases = [  # (fault, the Mac, its one-line reason, a visit sheet, how a person clears it)
        ("no-prepare", "ou-2", "the update's preparation did not start", False, lambda: sim.cli(*offer, "ou-2")),
        ("no-return", "ou-3", "went down for the update and did not come back within 20 s", True,
         lambda: sim.cli("reboot", "ou-3")),
        ("filevault-locked", "ou-4", "came back FileVault-locked", True, lambda: sim.cli("unlock", "ou-4")),
    ]
    sim.cli("set", "ou-1", "filevault=true")  # FileVault on, unlockable over SSH (macOS 26): os-update unlocks it
    sim.cli(*offer)
    for fault, node, reason, visit, clear in cases:
        sim.cli(*offer, node, "--fault", f"{node}={fault}")
        before = builds(sim)
        stopped = os_update(sim, password_file)
        out = stopped.stdout
        assert stopped.returncode == 1, out + stopped.stderr
        assert f"{node}: stopped: {reason}" in out, out
        assert ("visit sheet:" in out) == visit, out
        after = [n for n in ["ou-2", "ou-3", "ou-4", "ou-1"] if n > node or n == "ou-1"]
        assert all(builds(sim)[n] == before[n] == "25C56" for n in after if n != node), out
        clear()
    done = os_update(sim, password_file)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(builds(sim).values()) == {"25F84"}
    assert restarts(sim) == ["ou-2", "ou-3", "ou-4", "ou-1"]
    assert "ou-1: FileVault unlocked over SSH" in (sim.dir / "power-agent.log").read_text()


def installs(sim, node: str) -> int:
    """How many installs the Mac's softwareupdate started (the double counts them)."""
    path = sim.dir / "nodes" / node / "fs/usr/local/libexec/macsim/softwareupdate-installs.json"
    return int(path.read_text()) if path.exists() else 0


def test_a_ctrl_c_during_a_preparation_then_a_rerun_installs_no_mac_twice_and_keeps_the_log(make_sim, tmp_path):
    plan = tmp_path / "plan.yml"
    names = ["oi-1", "oi-2"]
    plan.write_text(yaml.safe_dump({"nodes": {n: {"model": "mini-m4-pro"} for n in names},
                                    "cables": ["oi-1:1 -- oi-2:1"]}))
    sim = make_sim(topology=str(plan))
    password_file = tmp_path / "owner-password"
    password_file.write_text((sim.dir / "admin_password").read_text())
    password_file.chmod(0o600)
    # A preparation long enough that the rerun finds the canary (oi-2) still preparing; oi-1, rank 0 and
    # last, is only reached by the rerun and prepares in a second.
    offer = ("offer", "--macos-version", "26.5.2", "--macos-build", "25F84")
    sim.cli(*offer, "oi-2", "--prepare-seconds", "30")
    sim.cli(*offer, "oi-1", "--prepare-seconds", "1")
    inventory = str(sim.dir / "inventory.yml")
    for option, value in (("--poll", "nan"), ("--timeout", "-5"), ("--poll", "1e9")):
        refused = mlx_fleet("os-update", "-i", inventory, "--password-file", str(password_file), option, value,
                            check=False)
        assert refused.returncode == 2 and option in refused.stderr, refused.stderr
    assert installs(sim, "oi-2") == 0 and restarts(sim) == []

    record = sim.dir / ".mlx-fleet" / "os-update.json"
    run = subprocess.Popen([str(BIN / "mlx-fleet"), "os-update", "-i", inventory, "--password-file",
                            str(password_file), *SHORT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and run.poll() is None:  # until the canary's install started
        if record.exists() and '"installed": true' in record.read_text():
            break
        time.sleep(0.2)
    run.send_signal(2)  # Ctrl-C, during oi-2's preparation
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, out + err
    assert "run mlx-fleet os-update again to resume" in out and "converge" not in out + err, out + err
    log = sim.dir / "nodes" / "oi-2" / "fs/Library/Logs/mlx-fleet/softwareupdate-install.log"
    first = log.read_text()
    assert "Downloading" in first and installs(sim, "oi-2") == 1

    resumed = os_update(sim, password_file, "--timeout", "180")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert set(builds(sim).values()) == {"25F84"}
    assert installs(sim, "oi-2") == 1 and installs(sim, "oi-1") == 1  # the canary's install was not repeated
    assert restarts(sim) == ["oi-2", "oi-1"]
    assert log.read_text() == first  # the first run's output kept (no second install on oi-2 wrote to it)
