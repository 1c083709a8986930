"""mlx-fleet audit and mlx-fleet record against simulated Macs (issue 9).

One 4-Mac cluster for the whole module: mini-1..3 a full mesh, mini-4 cabled to mini-1 and mini-3 (so
mini-2 has a free port to move a cable to). Before anything is converged it is audited (all drift, no
failure); then mini-1..3 alone are converged and audited as a 3-Mac cluster (no drift); then all four
are converged. On that cluster: the audit changes nothing (state listing before and after); two records
differ only in their time and a package change is named by `record --diff`; each drift, made on mini-2
through the Mac's own tools or `mlx-fleet sim`, is reported alone with its exact lines and exit 1, and
reverted; one Mac unreachable gives exit 4 naming it; then every drift at once.
"""

from __future__ import annotations

import difflib
import hashlib
import ipaddress
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from simlib import BIN, ENV_CACHE, MLX_FLEET, REPO, STATE, Sim, cable_networks

pytestmark = pytest.mark.sim

MAC = "mini-2"
OLD_WHEELS = Path("/var/tmp/mlx-fleet-old-mlx")  # hand-installed wheels, shared with test_mlx_env_sim
UV = "/opt/mlx-fleet/store/bin/uv pip {} --python /opt/mlx-fleet/venv/bin/python"
SITE_PACKAGES = "/opt/mlx-fleet/venv/lib/python3.11/site-packages"
PLAN = {
    "nodes": {f"mini-{i}": {"model": "mini-m4-pro"} for i in range(1, 5)},
    "cables": ["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-3:2 -- mini-1:2",
               "mini-4:1 -- mini-1:3", "mini-4:2 -- mini-3:3"],
}
WIRED_LIMIT = 16384


def run(argv: list[str], timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def audit(inventory: Path) -> tuple[int, list[str]]:
    result = run([MLX_FLEET, "audit", "-i", str(inventory)], timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout.splitlines()


def converge(inventory: Path) -> float:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    result = run([str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"mlx_env_cache_dir={ENV_CACHE}",
                  str(REPO / "site.yml")], env=env)
    assert result.returncode == 0, result.stdout[-4000:]
    return time.monotonic() - started


def write_inventory(path: Path, inventory: dict, hosts: list[str]) -> Path:
    group = inventory["all"]["children"]["mlx_cluster"]
    group["hosts"] = {h: v for h, v in group["hosts"].items() if h in hosts}
    group["vars"]["macos_node_wired_limit_mb"] = WIRED_LIMIT  # so the LaunchDaemon is part of the state
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


class Cluster:
    """The module's cluster: the sim, its 4-Mac inventory, and what was seen on the way."""

    def __init__(self, sim: Sim):
        self.sim = sim
        self.inventory = write_inventory(sim.dir / "inventory.yml", sim.inventory, sim.nodes)
        self.out = sim.dir / ".mlx-fleet"

    def ssh(self, node: str, command: str) -> str:
        result = run(["ssh", "-F", str(self.sim.dir / "ssh_config"), "-o", "BatchMode=yes", node, command],
                     timeout=120)
        assert result.returncode == 0, f"{node}: {command}: {result.stderr}"
        return result.stdout

    def sim_cli(self, *args: str) -> None:
        self.sim.cli(*args)

    def exec(self, node: str, *command: str) -> None:
        self.sim.cli("exec", node, "--", *command)

    def ledger(self, name: str) -> dict:
        return json.loads((self.out / name).read_text())

    def fix(self, command: str) -> str:
        return f"  fix: {command.format(inventory=self.inventory)}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    plan = tmp_path_factory.mktemp("plan") / "plan.yml"
    plan.write_text(yaml.safe_dump(PLAN))
    sim = Sim(topology=str(plan))
    try:
        c = Cluster(sim)
        c.fresh = audit(c.inventory)
        three = write_inventory(sim.dir / "three" / "inventory.yml", yaml.safe_load(
            (sim.dir / "inventory.yml").read_text()), ["mini-1", "mini-2", "mini-3"])
        took = converge(three)
        c.three = audit(three)
        took_four = converge(c.inventory)
        print(f"\nconverge: mini-1..3 {took:.0f} s, then all four {took_four:.0f} s")
        yield c
    finally:
        sim.down()


def test_never_converged_cluster_is_all_drift_and_no_failure(cluster):
    rc, lines = cluster.fresh
    macs = "mini-1, mini-2, mini-3, mini-4"
    assert rc == 1, lines
    assert lines[0].startswith("drift: ") and lines[0].endswith(" on 4 Macs differ")
    for line in (f"environment: {macs}: expected the locked environment at /opt/mlx-fleet/venv; found none at "
                 "/opt/mlx-fleet/venv",
                 f"pmset sleep: {macs}: expected 0; found 1",
                 f"wired limit: {macs}: expected {WIRED_LIMIT} MB; found macOS's default (0)",
                 f"Thunderbolt Bridge: {macs}: expected off (service disabled, bridge0 inactive); found service "
                 "enabled, bridge0 active",
                 "hostfile.json on the controller: expected written by mlx-fleet converge; found none"):
        assert line in lines, lines
    assert lines[-1] == "result: drift (exit 1)"


def test_converged_three_macs_no_drift(cluster):
    rc, lines = cluster.three
    assert rc == 0 and len(lines) == 1, lines
    assert lines[0].startswith("no drift: ") and " facts compared on 3 Macs (report: " in lines[0], lines


def listing(cluster) -> dict[str, str]:
    """Every Mac's state (STATE) and every path under /opt with its size and modification time."""
    return {n: cluster.ssh(n, STATE) + cluster.ssh(n, "find /opt -printf '%p %s %T@\\n' | sort")
            for n in cluster.sim.nodes}


def changes(before: dict[str, str], after: dict[str, str]) -> str:
    """What differs between two listings, per Mac, as a unified diff."""
    text = ""
    for node in before:
        if before[node] != after.get(node):
            diff = difflib.unified_diff(before[node].splitlines(), after.get(node, "").splitlines(), "before", "after",
                                        lineterm="", n=0)
            text += f"\n{node}:\n" + "\n".join(diff)
    return text


def test_converged_four_macs_no_drift_and_nothing_changes(cluster):
    before = listing(cluster)
    rc, lines = audit(cluster.inventory)
    after = listing(cluster)
    assert after == before, "the audit changed a Mac:" + changes(before, after)
    assert rc == 0 and len(lines) == 1, lines
    assert lines[0].startswith("no drift: ") and " facts compared on 4 Macs (report: " in lines[0]
    report = json.loads((cluster.out / "audit.json").read_text())
    assert report["format"] == "mlx-fleet-audit/1" and report["drift"] == 0 and report["macs"] == cluster.sim.nodes
    assert lines[0].startswith(f"no drift: {report['facts_compared']} facts")
    assert '<td class="drift">' not in (cluster.out / "audit.html").read_text()


# --- the drifts, each made on mini-2 and put back ---------------------------------------------------


def old_wheels() -> list[str]:
    """mlx and mlx-cpu 0.32.3 and six (not in the lock), in a folder the simulated Macs can read."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.artifacts import Cache, best_wheel
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import index_files

    cache = Cache(OLD_WHEELS)
    tags = ["cp311-cp311-manylinux_2_35_x86_64", "py3-none-manylinux_2_35_x86_64", "py3-none-any"]
    paths = [str(cache.fetch(best_wheel(index_files(n, v, None, ["linux-x86_64"], "3.11"), tags)))
             for n, v in (("mlx", "0.32.3"), ("mlx-cpu", "0.32.3"), ("six", "1.17.0"))]
    OLD_WHEELS.chmod(0o755)
    cache.artifacts.chmod(0o755)
    return paths


def mlx_by_hand(c, undo=False):
    wheels = "/opt/mlx-fleet/store/wheels/mlx-0.32.4-*.whl /opt/mlx-fleet/store/wheels/mlx_cpu-0.32.4-*.whl" \
        if undo else " ".join(old_wheels()[:2])
    c.ssh(MAC, UV.format("install -q --offline --no-index --no-deps") + " " + wheels)
    env = "ansible-playbook -i {inventory} mlx_fleet.cluster.env"
    return [f"package mlx: {MAC}: expected 0.32.4 (the lock); found 0.32.3", c.fix(env),
            f"package mlx-cpu: {MAC}: expected 0.32.4 (the lock); found 0.32.3", c.fix(env)]


def extra_package(c, undo=False):
    c.ssh(MAC, UV.format("uninstall -q") + " six" if undo else
          UV.format("install -q --offline --no-index --no-deps") + " " + old_wheels()[2])
    return [f"extra packages: {MAC}: expected none beyond the lock; found six 1.17.0",
            c.fix("ansible-playbook -i {inventory} mlx_fleet.cluster.env")]


def file_modified(c, undo=False):
    source = f"{SITE_PACKAGES}/mlx_lm/__init__.py"
    c.ssh(MAC, f"cp ~/init.py.orig {source}" if undo else f"cp {source} ~/init.py.orig && echo '# edited' >> {source}")
    return [f"package mlx-lm: {MAC}: expected 0.32.2 with its files as installed; found 0.32.2 with "
            "mlx_lm/__init__.py modified (not as its RECORD lists them)",
            c.fix("ansible-playbook -i {inventory} mlx_fleet.cluster.env")]


def other_build(c, undo=False):
    c.sim_cli("set", MAC, f"os_build={'25C56' if undo else '25C57'}")
    return build_lines()


def build_lines():
    return [f"macOS: {MAC}: expected 26.2 (25C56), as on mini-1, mini-3 and mini-4; found 26.2 (25C57)",
            "  fix: update macOS on mini-1, mini-3 and mini-4 to 26.2 (25C57) (one build on every Mac: RDMA "
            "breaks across mixed builds)"]


def sleep_on(c, undo=False):
    c.exec(MAC, "pmset", "-a", "sleep", "0" if undo else "10")
    return [f"pmset sleep: {MAC}: expected 0; found 10", c.fix("ansible-playbook -i {inventory} mlx_fleet.cluster.node")]


def wired_limit(c, undo=False):
    c.exec(MAC, "sysctl", "-w", f"iogpu.wired_limit_mb={WIRED_LIMIT if undo else 8192}")
    return [f"wired limit: {MAC}: expected {WIRED_LIMIT} MB; found 8192 MB (the LaunchDaemon sets {WIRED_LIMIT} MB "
            "at boot)", c.fix("ansible-playbook -i {inventory} mlx_fleet.cluster.node")]


FABRIC_FIX = "mlx-fleet converge -i {inventory} (the fabric step configures the Thunderbolt ports)"


def bridge_on(c, undo=False):
    c.exec(MAC, "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off" if undo else "on")
    return [f"Thunderbolt Bridge: {MAC}: expected off (service disabled, bridge0 inactive); found service enabled, "
            "bridge0 active", c.fix(FABRIC_FIX)]


def address_changed(c, undo=False):
    network = ipaddress.ip_network(cable_networks(c.out)[f"mini-1:1 -- {MAC}:1"])
    mine = str(network.network_address + 2)  # mini-2 is the cable's upper end
    c.exec(MAC, "ifconfig", c.sim.device(MAC, 1), "inet", mine if undo else "192.168.250.1",
           "netmask", "255.255.255.252")
    return [f"Thunderbolt 1 address: {MAC}: expected {mine}/30 ({c.sim.device(MAC, 1)}, address ledger); found "
            "192.168.250.1/30", c.fix(FABRIC_FIX)]


def cable_moved(c, undo=False):
    c.sim_cli("unplug", f"{MAC}:3" if undo else f"{MAC}:1")
    c.sim_cli("plug", "mini-1:1", f"{MAC}:1" if undo else f"{MAC}:3")
    return [f"cable mini-1:1 -- {MAC}:1: mini-1, {MAC}: expected cabled (as at the last converge); found wrong port: "
            f"mini-1:1 -- {MAC}:1 is cabled as mini-1:1 -- {MAC}:3",
            f"  fix: move the cable in {MAC} Thunderbolt 3 to Thunderbolt 1"]


def rdma_off_after_update(c, undo=False):
    c.sim_cli("set", MAC, f"os_build={'25C56' if undo else '25C57'}")
    c.sim_cli("recovery", MAC, "--", "rdma_ctl", "enable" if undo else "disable")
    c.sim_cli("reboot", MAC)
    seen = c.ledger("rdma-ledger.json")["nodes"][MAC]["last_seen_ready"]
    return build_lines() + [
        f"RDMA: {MAC}: expected ready (last seen ready {seen}); found RDMA is off again after a macOS update: last "
        f"seen ready on macOS 26.2 (25C56) at {seen}, now macOS 26.2 (25C57) with RDMA disabled; the update "
        "switched it off: do the Recovery step again",
        c.fix("the Recovery checklist: mlx-fleet checklist -i {inventory}, then mlx-fleet converge -i {inventory}")]


def hostfile_edited(c, undo=False):
    if undo:
        c.exec(MAC, "cp", str(c.out / "hostfile.json"), "/opt/mlx-fleet/hostfile.json")
    else:
        c.exec(MAC, "sh", "-c", "echo ' ' >> /opt/mlx-fleet/hostfile.json")
    want = hashlib.sha256((c.out / "hostfile.json").read_bytes()).hexdigest()
    have = hashlib.sha256((c.sim.dir / "nodes" / MAC / "fs/opt/mlx-fleet/hostfile.json").read_bytes()).hexdigest()
    return [f"hostfile.json: {MAC}: expected the controller's (sha256 {want[:12]}); found sha256 {have[:12]}",
            c.fix("mlx-fleet hostfile -i {inventory}")]


SERVICES = ["Ethernet", "Wi-Fi", "Thunderbolt Bridge", "Thunderbolt 1", "Thunderbolt 2"]  # mini-2's, converged


def service_order_changed(c, undo=False):
    first = [] if undo else ["Thunderbolt 1"]
    c.exec(MAC, "networksetup", "-ordernetworkservices", *first, *[s for s in SERVICES if s not in first])
    return [f"service order: {MAC}: expected the Thunderbolt services after the others; found Thunderbolt 1 (1) "
            "comes before Ethernet, Wi-Fi",
            "  fix: sudo networksetup -ordernetworkservices Ethernet Wi-Fi 'Thunderbolt 1' 'Thunderbolt Bridge' "
            "'Thunderbolt 2'"]


EXO_LABEL = "io.exo.networksetup"
EXO_PLIST = f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict><key>Label</key><string>{EXO_LABEL}</string>
<key>ProgramArguments</key><array><string>/usr/bin/true</string></array></dict></plist>
"""


def exo_network_manager(c, undo=False):
    plist = c.sim.dir / "nodes" / MAC / "fs" / "Library" / "LaunchDaemons" / f"{EXO_LABEL}.plist"
    if undo:
        c.exec(MAC, "launchctl", "bootout", f"system/{EXO_LABEL}")
        plist.unlink()
    else:
        plist.write_text(EXO_PLIST)
        c.exec(MAC, "launchctl", "bootstrap", "system", f"/Library/LaunchDaemons/{EXO_LABEL}.plist")
    return [f"other network managers: {MAC}: expected none loaded; found {EXO_LABEL} is loaded (exo's network setup, "
            "which resets the Thunderbolt ports to DHCP)",
            f"  fix: sudo launchctl bootout system/{EXO_LABEL} and remove /Library/LaunchDaemons/{EXO_LABEL}.plist (or "
            "stop that program from managing the Thunderbolt ports)"]


def filevault_on(c, undo=False):
    c.sim_cli("set", MAC, f"filevault={'false' if undo else 'true'}")
    return [f"FileVault: {MAC}: expected off (a restarted Mac comes back on the network); found FileVault is on: after "
            "a restart the Mac waits for a password at the unlock screen, off the network, until someone types it",
            f"  fix: on {MAC}: sudo fdesetup disable, or restart it only with sudo fdesetup authrestart (and keep "
            "someone near it for updates)"]


def facts(lines: list[str]) -> int:
    """How many facts differ in the expected lines (one line each, then its fix)."""
    return sum(not line.startswith("  fix: ") for line in lines)


DRIFTS = [mlx_by_hand, extra_package, file_modified, other_build, sleep_on, wired_limit, bridge_on, address_changed,
          cable_moved, rdma_off_after_update, hostfile_edited, service_order_changed, exo_network_manager, filevault_on]


def test_records_differ_only_in_time_and_diff_names_a_package_change(cluster, tmp_path):
    def record(name: str, *launch: str) -> Path:
        out = tmp_path / name
        result = run([MLX_FLEET, "record", "-i", str(cluster.inventory), "--out", str(out), *launch], timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        return out

    first, second = record("a.json"), record("b.json", "--", "python3", "train.py", "--lr", "0.1")
    saved = json.loads(second.read_text())
    assert saved["format"] == "mlx-fleet-record/1" and saved["command"]["text"] == "python3 train.py --lr 0.1"
    assert saved["macs"][MAC]["packages"]["mlx"]["version"] == "0.32.4" and saved["cluster"]["backend"]
    assert "| mini-2 | 26.2 (25C56) | Mac16,11 |" in second.with_suffix(".md").read_text()
    third = record("c.json")
    same = run([MLX_FLEET, "record", "--diff", str(first), str(third)])
    assert same.returncode == 0 and len(same.stdout.splitlines()) == 1, same.stdout
    assert same.stdout.startswith("recorded_at: "), same.stdout

    mlx_by_hand(cluster)
    try:
        changed = record("d.json")
    finally:
        mlx_by_hand(cluster, undo=True)
    diff = run([MLX_FLEET, "record", "--diff", str(third), str(changed)])
    assert diff.returncode == 1
    assert f"macs.{MAC}.packages.mlx.version: 0.32.4 -> 0.32.3" in diff.stdout.splitlines(), diff.stdout
    assert f"macs.{MAC}.packages.mlx-cpu.version: 0.32.4 -> 0.32.3" in diff.stdout.splitlines(), diff.stdout
    print("\nrecord --diff after mlx changed by hand:\n" + diff.stdout)


@pytest.mark.parametrize("drift", DRIFTS, ids=lambda f: f.__name__)
def test_each_drift_alone(cluster, drift):
    expected = drift(cluster)
    try:
        rc, lines = audit(cluster.inventory)
    finally:
        drift(cluster, undo=True)
    print(f"\n{drift.__name__}:\n" + "\n".join(lines))
    assert rc == 1, lines
    assert lines[1:-2] == expected, lines
    assert lines[0].startswith(f"drift: {facts(expected)} of "), lines
    assert lines[-1] == "result: drift (exit 1)"


def test_unreachable_mac_is_named_and_the_others_audited(cluster):
    cluster.sim_cli("recovery", "mini-4", "--", "true")  # off the network until it restarts
    try:
        rc, lines = audit(cluster.inventory)
    finally:
        cluster.sim_cli("reboot", "mini-4")
    print("\nmini-4 unreachable:\n" + "\n".join(lines))
    assert rc == 4, lines
    assert lines[0].startswith("no drift: ") and lines[0].endswith(" facts compared on 3 Macs"), lines
    assert lines[1].startswith("not audited: mini-4: unreachable: "), lines
    assert lines[-1] == "result: some Macs were not audited (exit 4)"
    assert json.loads((cluster.out / "audit.json").read_text())["not_audited"] == ["mini-4"]


def test_all_drifts_together(cluster):
    expected = []
    for drift in [rdma_off_after_update] + [d for d in DRIFTS if d not in (rdma_off_after_update, other_build)]:
        expected += drift(cluster)  # the restart first: it forgets ifconfig and sysctl -w changes
    rc, lines = audit(cluster.inventory)
    print("\nall drifts on mini-2 at once:\n" + "\n".join(lines))
    assert rc == 1
    assert sorted(lines[1:-2]) == sorted(expected), lines
    assert lines[0].startswith(f"drift: {facts(expected)} of "), lines
