"""mlx-fleet audit and mlx-fleet record against simulated Macs (issue 9).

One 4-Mac cluster for the whole module: mini-1..3 a full mesh, mini-4 cabled to mini-1 and mini-3 (so
mini-2 has a free port to move a cable to). Before anything is converged it is audited (all drift, no
failure); then mini-1..3 alone are converged and audited as a 3-Mac cluster (no drift); then all four
are converged. On that cluster: the audit changes nothing (state listing before and after); two records
differ only in their time and a package change is named by `record --diff`; each drift, made on mini-2
through the Mac's own tools or `mlx-fleet sim`, is reported alone as its findings in audit.json (the fact,
the Macs, what was expected and found, the fix's command) with exit 1, and reverted; one Mac unreachable
gives exit 4 naming it; then every drift at once.
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
CONVERGED = "converged"  # the snapshot of the converged 4-Mac cluster


def run(argv: list[str], timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


class Audited:
    """An audit's exit status, its report (audit.json) and the lines it printed (for the test's log)."""

    def __init__(self, inventory: Path):
        result = run([MLX_FLEET, "audit", "-i", str(inventory)], timeout=300)
        assert "Traceback" not in result.stderr, result.stderr
        self.rc, self.lines = result.returncode, result.stdout.splitlines()
        self.report = json.loads((inventory.parent / ".mlx-fleet" / "audit.json").read_text())
        self.findings = self.report["findings"]


def audit(inventory: Path) -> Audited:
    return Audited(inventory)


class Has(str):
    """A pinned field's value that must appear in the finding's field (the rest of it is wording)."""


def finding(fact: str, macs: list[str] | None = None, **fields: str) -> dict:
    """A finding the audit must report: its fact and Macs exactly, each of expected, found and fix exactly or,
    given as Has(...), containing that."""
    return {"fact": fact, "macs": [MAC] if macs is None else macs, **fields}


def matches(actual: dict, pinned: dict) -> bool:
    return all(value in actual[key] if isinstance(value, Has) else actual[key] == value
               for key, value in pinned.items())


def unmatched(findings: list[dict], pinned: list[dict]) -> list[dict]:
    """The pinned findings the audit did not report, then the findings no pin accounts for."""
    missing = [p for p in pinned if not any(matches(f, p) for f in findings)]
    extra = [f for f in findings if not any(matches(f, p) for p in pinned)]
    return missing + extra


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
        sim.cli("snapshot", CONVERGED)
        print(f"\nconverge: mini-1..3 {took:.0f} s, then all four {took_four:.0f} s")
        yield c
    finally:
        sim.down()


def test_never_converged_cluster_is_all_drift_and_no_failure(cluster):
    fresh = cluster.fresh
    macs = ["mini-1", "mini-2", "mini-3", "mini-4"]
    assert fresh.rc == 1, fresh.lines
    assert fresh.report["macs"] == macs and fresh.report["not_audited"] == [] and fresh.report["drift"] > 0
    reported = {(f["fact"], f["macs"][0]): f for f in fresh.findings}
    for pinned in (finding("environment", expected=Has("/opt/mlx-fleet/venv"), found=Has("none")),
                   finding("pmset sleep", expected="0", found="1"),
                   finding("wired limit", expected=f"{WIRED_LIMIT} MB", found=Has("(0)")),
                   finding("Thunderbolt Bridge", expected=Has("bridge0 inactive"), found=Has("bridge0 active"))):
        for mac in macs:  # each Mac has the finding (one finding may name several)
            assert any(matches(f, pinned | {"macs": f["macs"]}) and mac in f["macs"] for f in fresh.findings), \
                (pinned, fresh.lines)
    assert ("hostfile.json on the controller", "cluster") in reported, fresh.lines
    assert reported[("hostfile.json on the controller", "cluster")]["found"] == "none"


def test_converged_three_macs_no_drift(cluster):
    three = cluster.three
    assert three.rc == 0, three.lines
    assert three.report["drift"] == 0 and three.findings == [] and three.report["facts_compared"] > 0
    assert three.report["macs"] == ["mini-1", "mini-2", "mini-3"] and three.report["not_audited"] == []


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
    audited = audit(cluster.inventory)
    after = listing(cluster)
    assert after == before, "the audit changed a Mac:" + changes(before, after)
    assert audited.rc == 0, audited.lines
    report = audited.report
    assert report["format"] == "mlx-fleet-audit/1" and report["drift"] == 0 and report["macs"] == cluster.sim.nodes
    assert report["findings"] == [] and report["not_audited"] == [] and report["facts_compared"] > 0
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
    return [finding(f"package {name}", expected=Has("0.32.4"), found="0.32.3", fix=Has(FIX_ENV))
            for name in ("mlx", "mlx-cpu")]


def extra_package(c, undo=False):
    c.ssh(MAC, UV.format("uninstall -q") + " six" if undo else
          UV.format("install -q --offline --no-index --no-deps") + " " + old_wheels()[2])
    return [finding("extra packages", found="six 1.17.0", fix=Has(FIX_ENV))]


def file_modified(c, undo=False):
    source = f"{SITE_PACKAGES}/mlx_lm/__init__.py"
    c.ssh(MAC, f"cp ~/init.py.orig {source}" if undo else f"cp {source} ~/init.py.orig && echo '# edited' >> {source}")
    return [finding("package mlx-lm", expected=Has("0.32.2"), found=Has("mlx_lm/__init__.py modified"),
                    fix=Has(FIX_ENV))]


def other_build(c, undo=False):
    c.sim_cli("set", MAC, f"os_build={'25C56' if undo else '25C57'}")
    return build_findings()


def build_findings():
    return [finding("macOS", expected=Has("26.2 (25C56)"), found="26.2 (25C57)", fix=Has("26.2 (25C57)"))]


def sleep_on(c, undo=False):
    c.exec(MAC, "pmset", "-a", "sleep", "0" if undo else "10")
    return [finding("pmset sleep", expected="0", found="10", fix=Has(FIX_NODE))]


def wired_limit(c, undo=False):
    c.exec(MAC, "sysctl", "-w", f"iogpu.wired_limit_mb={WIRED_LIMIT if undo else 8192}")
    return [finding("wired limit", expected=f"{WIRED_LIMIT} MB", found=Has("8192 MB"), fix=Has(FIX_NODE))]


FIX_ENV, FIX_NODE, FIX_FABRIC = "mlx_fleet.cluster.env", "mlx_fleet.cluster.node", "mlx-fleet converge"  # the fix's command


def bridge_on(c, undo=False):
    c.exec(MAC, "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off" if undo else "on")
    return [finding("Thunderbolt Bridge", expected=Has("bridge0 inactive"), found=Has("bridge0 active"),
                    fix=Has(FIX_FABRIC))]


def address_changed(c, undo=False):
    network = ipaddress.ip_network(cable_networks(c.out)[f"mini-1:1 -- {MAC}:1"])
    mine = str(network.network_address + 2)  # mini-2 is the cable's upper end
    c.exec(MAC, "ifconfig", c.sim.device(MAC, 1), "inet", mine if undo else "192.168.250.1",
           "netmask", "255.255.255.252")
    return [finding("Thunderbolt 1 address", expected=Has(f"{mine}/30 ({c.sim.device(MAC, 1)}"),
                    found="192.168.250.1/30", fix=Has(FIX_FABRIC))]


def cable_moved(c, undo=False):
    c.sim_cli("unplug", f"{MAC}:3" if undo else f"{MAC}:1")
    c.sim_cli("plug", "mini-1:1", f"{MAC}:1" if undo else f"{MAC}:3")
    return [finding(f"cable mini-1:1 -- {MAC}:1", ["mini-1", MAC], expected=Has("cabled"),
                    found=Has(f"mini-1:1 -- {MAC}:3"), fix=Has(f"{MAC} Thunderbolt 3"))]


def rdma_off_after_update(c, undo=False):
    c.sim_cli("set", MAC, f"os_build={'25C56' if undo else '25C57'}")
    c.sim_cli("recovery", MAC, "--", "rdma_ctl", "enable" if undo else "disable")
    c.sim_cli("reboot", MAC)
    seen = c.ledger("rdma-ledger.json")["nodes"][MAC]["last_seen_ready"]
    return build_findings() + [
        finding("RDMA", expected=Has(seen), found=Has("26.2 (25C57) with RDMA disabled"),
                fix=Has("mlx-fleet checklist"))]


def hostfile_edited(c, undo=False):
    if undo:
        c.exec(MAC, "cp", str(c.out / "hostfile.json"), "/opt/mlx-fleet/hostfile.json")
    else:
        c.exec(MAC, "sh", "-c", "echo ' ' >> /opt/mlx-fleet/hostfile.json")
    want = hashlib.sha256((c.out / "hostfile.json").read_bytes()).hexdigest()
    have = hashlib.sha256((c.sim.dir / "nodes" / MAC / "fs/opt/mlx-fleet/hostfile.json").read_bytes()).hexdigest()
    return [finding("hostfile.json", expected=Has(want[:12]), found=Has(have[:12]), fix=Has("mlx-fleet hostfile"))]


SERVICES = ["Ethernet", "Wi-Fi", "Thunderbolt Bridge", "Thunderbolt 1", "Thunderbolt 2"]  # mini-2's, converged


def service_order_changed(c, undo=False):
    first = [] if undo else ["Thunderbolt 1"]
    c.exec(MAC, "networksetup", "-ordernetworkservices", *first, *[s for s in SERVICES if s not in first])
    return [finding("service order", found=Has("Thunderbolt 1 (1)"),
                    fix=Has("-ordernetworkservices Ethernet Wi-Fi 'Thunderbolt 1' 'Thunderbolt Bridge' 'Thunderbolt 2'"))]


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
    return [finding("other network managers", found=Has(EXO_LABEL),
                    fix=Has(f"launchctl bootout system/{EXO_LABEL}"))]


def filevault_on(c, undo=False):
    c.sim_cli("set", MAC, f"filevault={'false' if undo else 'true'}")
    return [finding("FileVault", expected=Has("off"), found=Has("FileVault is on"), fix=Has("fdesetup disable"))]


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
    assert saved["macs"][MAC]["macos"]["version"] == "26.2" and saved["macs"][MAC]["macos"]["build"] == "25C56"
    assert saved["macs"][MAC]["model"]["identifier"] == "Mac16,11" and second.with_suffix(".md").exists()
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
    for package in ("mlx", "mlx-cpu"):
        versions = [json.loads(path.read_text())["macs"][MAC]["packages"][package]["version"] for path in (third, changed)]
        assert versions == ["0.32.4", "0.32.3"]
        assert any(line.startswith(f"macs.{MAC}.packages.{package}.version:") for line in diff.stdout.splitlines()), \
            diff.stdout
    print("\nrecord --diff after mlx changed by hand:\n" + diff.stdout)


@pytest.mark.parametrize("drift", DRIFTS, ids=lambda f: f.__name__)
def test_each_drift_alone(cluster, drift):
    expected = drift(cluster)
    try:
        audited = audit(cluster.inventory)
    finally:
        drift(cluster, undo=True)
    print(f"\n{drift.__name__}:\n" + "\n".join(audited.lines))
    assert audited.rc == 1, audited.lines
    assert audited.report["drift"] == len(expected) == len(audited.findings), audited.lines
    assert unmatched(audited.findings, expected) == [], audited.lines


def test_unreachable_mac_is_named_and_the_others_audited(cluster):
    cluster.sim_cli("recovery", "mini-4", "--", "true")  # off the network until it restarts
    try:
        audited = audit(cluster.inventory)
    finally:
        cluster.sim_cli("reboot", "mini-4")
    print("\nmini-4 unreachable:\n" + "\n".join(audited.lines))
    assert audited.rc == 4, audited.lines
    assert audited.report["not_audited"] == ["mini-4"] and audited.report["macs"] == ["mini-1", "mini-2", "mini-3"]
    assert audited.report["drift"] == 0 and audited.report["facts_compared"] > 0, audited.lines


def test_all_drifts_together(cluster):
    expected = []
    try:
        for drift in [rdma_off_after_update] + [d for d in DRIFTS if d not in (rdma_off_after_update, other_build)]:
            expected += drift(cluster)  # the restart first: it forgets ifconfig and sysctl -w changes
        audited = audit(cluster.inventory)
    finally:
        cluster.sim_cli("restore", CONVERGED)  # the converged cluster again, for the tests after this one
    print("\nall drifts on mini-2 at once:\n" + "\n".join(audited.lines))
    assert audited.rc == 1
    assert audited.report["drift"] == len(expected) == len(audited.findings), audited.lines
    assert unmatched(audited.findings, expected) == [], audited.lines
