"""The checks that guard the rack, each pinned by a test that fails when the check is weakened.

Each test here was seen to fail against a hand-made weakening of its check (a comparison loosened, a
condition dropped), which the rest of the unit suite let through.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import os
import signal
import stat
import tarfile
import zipfile
from ipaddress import IPv4Interface
from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env as env_node
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import normalize_power, plan_power
from ansible_collections.mlx_fleet.cluster.plugins.modules import mlx_env as mlx_env_module
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services
from ansible_collections.mlx_fleet.cluster.plugins.modules import mlx_env_switch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model import cluster as cluster_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
from mlx_fleet import watch
from mlx_fleet import watch_page
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.cable_advice import HostPorts, advise
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, CablePlanError, Port, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import PYTHON_BUILD_BASE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_resolve import python_builds
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.inventory_checks import check_inventory, inventory_problems
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.onboarding import assess
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.outputs import current_files, staged
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.runlock import LockBusy, run_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import Refusal, refusal
from mlx_fleet import interrupt, onboard, onboard_ssh, watch_cli
from mlx_fleet import record as records
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK, UserError
from mlx_fleet.verify import check_program, jobs
from captures import THUNDERBOLT_OUTPUTS
from conftest import FIXTURE_DIR, load
from module_runner import Commands, run_module
from factories import FABRIC, HOSTS, MESH, NODE, Cluster, audit, converged, joining, minis, node, plan
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import CLUSTER


# --- the run lock ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_token", [None, ""])
def test_a_caller_with_no_token_is_not_the_lock_s_own_run(tmp_path, monkeypatch, env_token):
    # A run without a token (a plain ansible-playbook, a second CLI) holds it; a caller whose environment
    # has no token, or an empty one, waits like anyone else.
    if env_token is None:
        monkeypatch.delenv(runlock.TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(runlock.TOKEN_ENV, env_token)
    with run_lock(tmp_path, "mlx-fleet hostfile"):
        with pytest.raises(LockBusy, match="in use by mlx-fleet hostfile"):
            with run_lock(tmp_path, "fabric task", wait=0):
                pass


def test_a_shorter_holder_record_leaves_no_stale_bytes(tmp_path):
    with run_lock(tmp_path, "a run with a long name " * 10, token="t" * 64):
        pass
    with run_lock(tmp_path, "short") as holder:
        text = (tmp_path / runlock.LOCK_FILE).read_text()
        assert text == json.dumps(holder) + "\n"
        assert json.loads(text)["what"] == "short"


# --- the write guard ---------------------------------------------------------------------------------

def test_no_mac_came_through_keeps_the_last_hostfiles():
    assert refusal(HOSTS, [], None, {}, {}, {}) == Refusal(dropped=tuple(HOSTS))


def test_a_port_s_address_changed_with_the_same_hosts_and_cables_keeps_the_last_hostfiles():
    before = plan(Cluster.of("mini-m4-pro", 3))
    now = copy.deepcopy(before)
    port = now["network"]["mini-2"][0]
    port["address"] = "192.168.250.1"
    assert set(now["network"]) == set(before["network"]) and now["cables"] == before["cables"]
    assert refusal(HOSTS, HOSTS, before, now["cable_ends"], now["network"], {}) == Refusal(readdressed=True)


# --- the host-key fingerprint ------------------------------------------------------------------------

def _trusting(monkeypatch, key: str) -> SimpleNamespace:
    monkeypatch.setattr(onboard_ssh, "scan_host_key", lambda target: key)
    monkeypatch.setattr(onboard_ssh, "known_keys", lambda target: [])
    return SimpleNamespace(name="studio-4", hostname="10.0.0.14", known_hosts="/nonexistent/known_hosts")


@pytest.mark.parametrize("cut", ["prefix", "truncated", "scheme only", "longer"])
def test_a_prefix_or_a_truncated_fingerprint_is_not_a_match(monkeypatch, cut):
    key = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(range(32))).decode()
    target = _trusting(monkeypatch, key)
    right = onboard_ssh.fingerprint(key)
    given = {"prefix": right[:20], "truncated": right[:-1], "scheme only": "SHA256:", "longer": right + "A"}[cut]
    with pytest.raises(UserError, match="refused before any password was sent"):
        onboard._trust(target, given)
    assert onboard._trust(target, right) == (key, False)


# --- the node's uv -----------------------------------------------------------------------------------

def _uv_wheel(binary: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("uv-0.13.9.data/scripts/uv", binary)
    return buffer.getvalue()


class _Failed(Exception):
    pass


def test_the_node_replaces_a_uv_binary_with_the_wrong_hash_and_refuses_to_run_one(tmp_path):
    module = SimpleNamespace(fail_json=lambda msg: (_ for _ in ()).throw(_Failed(msg)))
    uv_path = tmp_path / "bin" / "uv"
    uv_path.parent.mkdir()
    uv_path.write_bytes(b"#!someone else's uv")
    good = b"#!the locked uv"
    want = hashlib.sha256(good).hexdigest()
    with pytest.raises(_Failed, match="is missing or is not the locked uv"):
        mlx_env_module._check_uv(module, str(uv_path), want)
    wheel = tmp_path / "uv.whl"
    wheel.write_bytes(_uv_wheel(good))
    mlx_env_module._install_uv(module, str(wheel), str(uv_path), want)
    assert uv_path.read_bytes() == good and os.access(uv_path, os.X_OK)
    mlx_env_module._check_uv(module, str(uv_path), want)


# --- verify: lost output lines fail the rank ---------------------------------------------------------

def test_a_rank_that_exited_0_with_lost_output_lines_fails():
    tag = check_program.TAG
    stream = [f"{tag} 0 0 event {json.dumps({'event': 'start'})}",
              f"{tag} 0 2 out {json.dumps('a line after one that never came')}",
              f"{tag} 0 3 event {json.dumps({'event': 'exit', 'code': 0})}"]
    state = check_program.read_tagged(stream)[0]
    assert state["garbled"] == 1
    rank = jobs.Rank(0, "mini-1", state["lines"], state["events"], state["garbled"])
    assert rank.exit_code == 0 and not rank.ok
    assert rank.outcome() == "completed, but 1 of its output lines were lost in transit"
    job = jobs.Job("all_sum", "all_sum", "all_sum", "ring", {}, None, ranks=[rank])
    assert not job.passed and job.failed_ranks() == [rank]


# --- record --diff ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["SERIAL0005", "(absent)", None, {}, []])
def test_record_diff_names_a_key_present_in_one_record_only(value):
    a = {"format": records.FORMAT, records.TIME_KEY: "T1", "macs": {"mini-1": {"serial_number": "S1"}}}
    b = copy.deepcopy(a)
    b["macs"]["mini-5"] = {"serial_number": value}
    shown = value if isinstance(value, str) and value != "(absent)" else json.dumps(value)
    assert records.changes(a, b) == [("macs.mini-5.serial_number", "(absent)", shown)]
    assert records.changes(b, a) == [("macs.mini-5.serial_number", shown, "(absent)")]


# --- the audit ---------------------------------------------------------------------------------------

def _drift(state) -> list[tuple]:
    """The audit's findings of a state as data: (fact, Macs, expected, found, fix)."""
    return [(f.fact, list(f.hosts) or [CLUSTER], f.expected, f.found, f.fix) for f in audit(state).findings]


def test_macos_26_10_is_newer_than_26_2():
    state = converged()
    state[1]["mini-2"]["mlx_fleet_macos"].update(product_version="26.10", build_version="25Z10")
    [(fact, macs, expected, found, fix)] = _drift(state)
    # The newer build is the one to update to: the others are told to go to 26.10, not mini-2 back to 26.2.
    assert (fact, macs, found) == ("macOS", ["mini-2"], "26.10 (25Z10)")
    assert expected.startswith("26.2 (25C56)") and "26.10 (25Z10)" in fix and "26.2" not in fix
    for host in state[2]:
        state[2][host]["min_macos"] = "26.10"
        state[1][host]["mlx_fleet_macos"].update(product_version="26.10", build_version="25Z10")
    state[1]["mini-3"]["mlx_fleet_macos"].update(product_version="26.2", build_version="25C56")
    [(fact, macs, expected, found, fix)] = _drift(state)
    assert (fact, macs, found) == ("macOS", ["mini-3"], "26.2 (25C56)")
    assert expected.startswith("26.10 ") and "mini-3" in fix and fix.endswith("26.10 (25Z10)")


@pytest.mark.parametrize("source", ["AC Power", "Battery Power"])
def test_power_settings_are_checked_on_every_power_source(source):
    state = converged()
    pmset = node(state)["pmset"]
    pmset["Battery Power"] = copy.deepcopy(pmset["AC Power"])
    pmset[source]["sleep"] = 10
    found = "AC Power 10, Battery Power 0" if source == "AC Power" else "AC Power 0, Battery Power 10"
    assert _drift(state) == [("pmset sleep", ["mini-2"], "0", found, NODE.removeprefix("  fix: "))]
    changes, unsupported, before, after = plan_power(pmset, normalize_power({"sleep": 0}))
    assert "sleep" in changes and after[source]["sleep"] == 0


def test_the_bridge_service_off_while_bridge0_is_still_up_is_drift():
    state = converged()
    state[1]["mini-2"]["mlx_fleet_thunderbolt"]["bridge"].update(active=True, service_enabled=False)
    [(fact, macs, expected, found, fix)] = _drift(state)
    assert (fact, macs, fix) == ("Thunderbolt Bridge", ["mini-2"], FABRIC.removeprefix("  fix: "))
    assert found.split(", ") == ["service disabled", "bridge0 active"] and expected.startswith("off ")


def test_an_extra_thunderbolt_address_is_drift():
    state = converged()
    right = node(state)["addresses"]["en2"][0]
    node(state)["addresses"]["en2"] = [right, "192.168.250.1/30"]
    [(fact, macs, expected, found, fix)] = _drift(state)
    assert (fact, macs, fix) == ("Thunderbolt 1 address", ["mini-2"], FABRIC.removeprefix("  fix: "))
    assert expected.startswith(f"{right} ") and found.split(", ") == [right, "192.168.250.1/30"]


# --- the cable plan and cable advice ------------------------------------------------------------------

@pytest.mark.parametrize("twice", ["a:1 -- b:1", "b:1 -- a:1", "a:1--b:1"])
def test_a_cable_listed_twice_in_the_plan_is_refused(twice):
    with pytest.raises(CablePlanError, match="already used by cable a:1 -- b:1"):
        parse_cables(["a:1 -- b:1", twice], {"a": 4, "b": 4})


@pytest.mark.parametrize("what", ["drive", "dock"])
def test_a_port_with_a_drive_or_dock_is_not_free_in_the_cable_advice(what):
    cluster, macos = joining()
    models = {h: "studio-m3-ultra" for h in macos if h != "new"}
    plain = assess("new", macos, cluster.facts, models=models, cables=MESH)
    assert plain.add == ["new:2 -- studio-1:4", "new:3 -- studio-2:4", "new:4 -- studio-3:4"]
    for end in ("new:2", "studio-1:4"):
        _, port = cluster.port(end)
        port.update(connected=True, speed_is_max=False, peers=[],
                    devices=[{"name": "T7 Shield" if what == "drive" else "TS4", "vendor": "Samsung" if what == "drive"
                              else "CalDigit", "depth": 1}])
    busy = assess("new", macos, cluster.facts, models=models, cables=MESH)
    used = {end for cable in busy.add for end in cable.split(" -- ")}
    assert not busy.errors and not {"new:2", "studio-1:4"} & used
    assert busy.add == ["new:3 -- studio-1:5", "new:4 -- studio-2:4", "new:5 -- studio-3:4"]


def test_a_port_with_a_drive_is_not_free_in_the_fabric_s_advice():
    cluster = Cluster.of("mini-m4-pro", 4, "ring").unplug("mini-2:2").unplug("mini-3:1")
    assert cluster.fabric().errors[-1].endswith("connect mini-2 Thunderbolt 2 to mini-3 Thunderbolt 1")
    _, port = cluster.port("mini-2:2")
    port.update(connected=True, speed_is_max=False, devices=[{"name": "T7 Shield", "vendor": "Samsung", "depth": 1}])
    assert cluster.fabric().errors[-1].endswith("connect mini-2 Thunderbolt 3 to mini-3 Thunderbolt 1")
    _, port = cluster.port("mini-2:3")
    port.update(connected=True, speed_is_max=False, devices=[{"name": "TS4", "vendor": "CalDigit", "depth": 1}])
    assert cluster.fabric().errors[-1].endswith(
        "connect mini-2 (no free Thunderbolt port: free one first) to mini-3 Thunderbolt 1")


# --- issue 26, trust round two ------------------------------------------------------------------------

def test_published_outputs_are_readable_by_all_and_writable_by_the_owner_only(tmp_path):
    # A writer may leave a staged file group- or world-writable (umask 0); what is published is not.
    old = os.umask(0)
    try:
        with staged(tmp_path) as stage:
            (stage / "hostfile.json").write_text("{}")
            (stage / "hostfile.json").chmod(0o666)
    finally:
        os.umask(old)
    published = current_files(tmp_path)["hostfile.json"]
    assert stat.S_IMODE(published.stat().st_mode) == 0o644
    assert stat.S_IMODE(published.parent.stat().st_mode) == 0o755
    assert (tmp_path / "hostfile.json").read_text() == "{}"


def test_a_cabled_port_with_no_rdma_device_is_not_ready():
    cluster = minis(3).mesh()
    _, port = cluster.port("mini-2:1")
    port.update(rdma_device=None, rdma_state=None)
    node = cluster.assess().nodes["mini-2"]
    assert node.status == rdma.ENABLED_NOT_WORKING
    assert [(p.port.receptacle, p.outcome) for p in node.ports] == [(1, "no device"), (2, "active")]
    assert cluster.assess().nodes["mini-1"].status == rdma.READY


def _watch_reads(**changed):
    """One Mac's probe reads for the watch, from real captures (as test_watch's)."""
    return {name: (rc, out) for name, (rc, out, _) in THUNDERBOLT_OUTPUTS.items()} | {
        "sw_vers": (0, load(FIXTURE_DIR / "sw_vers__sudo-is-man-pmset__1.txt")),
        "boottime": (0, load(FIXTURE_DIR / "sysctl-kern.boottime__chef-ohai-uptime__1.txt")),
        "pmset": (0, load(FIXTURE_DIR / "pmset-g-custom__go-pmset-table-test__1.txt"))} | changed


def test_ibv_devinfo_killed_by_timeout_s_exit_124_is_stale_rdma():
    # 124 is what timeout(1) exits with (the probe's bounded read), whatever the code calls it.
    mac = watch.observe(_watch_reads(ibv_devinfo=(124, "")))
    assert mac["rdma_stale"] is True
    assert all(port["rdma_state"] is None for port in mac["ports"])  # unknown, not the last state seen
    found = watch.assess(watch.Baseline(["m1"]), {"m1": mac})
    assert found[("stale-rdma", "m1")].kind == "stale-rdma" and found[("stale-rdma", "m1")].hosts == ("m1",)
    failed = watch.observe(_watch_reads(ibv_devinfo=(1, "")))
    assert failed["rdma_stale"] is False


def _watched_pair() -> tuple[watch.Baseline, dict]:
    """A converged cable a:1 -- b:2 as the watch's baseline, and both Macs' records of it."""
    def record(number, uuid, peer, address):
        return {"up": True, "error": "", "build": "26.2 (25C56)", "booted": 1000, "booted_at": "1970-01-01T00:16:40Z",
                "power": {"sleep": 0}, "fingerprint": "abc", "rdma_enabled": True, "rdma_stale": False, "warnings": [],
                "services": [], "default_route": "en0", "filevault": None, "competing": [],
                "bridge": {"device": "bridge0", "active": False, "members": [], "service_enabled": False},
                "ports": [{"receptacle": number, "device": f"en{number + 1}", "domain_uuid": uuid, "connected": True,
                           "speed_gbps": 80, "speed_is_max": False, "devices": [],
                           "peers": [{"domain_uuid": peer, "model": "Mac16,11", "name": "Mac mini", "direct": True}],
                           "rdma_device": f"rdma_en{number + 1}", "rdma_state": "PORT_ACTIVE", "inet": [address]}]}
    baseline = watch.Baseline(["a", "b"], [cluster_model.link(Cable(Port("b", 2), Port("a", 1)), "192.168.0.0/30")],
                              ["a", "b"], {"a": "mini-m4-pro", "b": "mini-m4-pro"}, inventory="inv")
    return baseline, {"a": record(1, "A1", "B2", "192.168.0.1/30"), "b": record(2, "B2", "A1", "192.168.0.2/30")}


def test_bridge0_active_with_members_while_its_service_is_off_is_a_bridge_finding():
    baseline, macs = _watched_pair()
    assert watch.assess(baseline, macs) == {}
    macs["a"]["bridge"].update(active=True, members=["en2"])
    found = watch.assess(baseline, macs)
    assert [(f.kind, f.hosts) for f in found.values()] == [("bridge", ("a",))]


def test_an_unreachable_round_keeps_the_mac_s_last_good_state(tmp_path, monkeypatch):
    baseline, good = _watched_pair()
    rounds = iter([good, {"a": good["a"], "b": watch.unreachable("ssh: connect to host b port 22: timed out")}])
    watcher = object.__new__(watch_cli.Watch)  # the inventory and the Macs are the two rounds above
    watcher.args = SimpleNamespace(once=False, every=30, on_change=None)
    watcher.baseline, watcher.out, watcher.round, watcher.last_good, watcher.findings = (
        baseline, tmp_path / "watch", 0, {}, {})
    monkeypatch.setattr(watcher, "read_records", lambda: None)
    monkeypatch.setattr(watcher, "probe", lambda: next(rounds))
    watcher.one_round()
    events, _ = watcher.one_round()
    assert [(e["event"], e["state"]) for e in events] == [("unreachable", "new")]
    status = json.loads((watcher.out / watch_page.STATUS_FILE).read_text())
    assert status["last_good"]["b"] == good["b"] and watcher.last_good["b"] == good["b"]


@pytest.mark.parametrize("bare", ["\tstatus:", "\tstatus:   "])
def test_a_bare_status_line_in_ifconfig_is_a_value_error_naming_ifconfig(bare):
    real = load(FIXTURE_DIR / "ifconfig-en2__apple-tn3205__1.txt")
    assert mp.parse_ifconfig(real)["en2"]["status"] == "active"
    with pytest.raises(ValueError, match="ifconfig"):
        mp.parse_ifconfig(real.replace("\tstatus: active", bare).replace("    status: active", bare))


def test_a_job_with_no_ranks_did_not_pass():
    job = jobs.Job("all_sum", "all_sum", "all_sum", "ring", {}, None, ranks=[])
    assert not job.passed


def test_a_pool_inside_the_controller_s_network_is_refused():
    hosts = {"mini-1": {"ansible_host": "10.0.0.11"}}
    controller = [("en0", IPv4Interface("172.16.3.20/12"))]
    assert check_inventory(hosts, {"mlx_fleet_ip_pool": "192.168.0.0/16"}, controller) == []
    problems = inventory_problems(hosts, {"mlx_fleet_ip_pool": "172.20.0.0/16"}, controller)
    assert [p.variables for p in problems] == [("mlx_fleet_ip_pool",)]
    assert "172.16.0.0/12" in problems[0].line


def _target(user: str) -> onboard_ssh.Target:
    return onboard_ssh.Target("studio-4", "10.0.0.14", user, [], "10.0.0.14", "10.0.0.14", 22,
                              Path("/nonexistent/known_hosts"), Path("/nonexistent/id_ed25519"), False)


@pytest.mark.parametrize("user", ["admin;id", "admin ALL", "$(id)", "admin`id`", "ad min", "admin\tALL", "../admin",
                                  "admin\nALL"])
def test_a_user_with_shell_or_sudoers_characters_is_refused_before_any_session(user):
    with pytest.raises(UserError, match="--user"):
        onboard_ssh.install_access(_target(user), "AAAA", "secret", passwordless_sudo=True)


def test_a_user_with_a_trailing_newline_is_refused():
    # `$` also matches before a final newline: the name must match whole (fullmatch).
    with pytest.raises(UserError, match="--user"):
        onboard_ssh.install_access(_target("admin\n"), "AAAA", "secret", passwordless_sudo=True)


def test_a_disabled_bridge_service_is_reported_disabled():
    real = load(FIXTURE_DIR / "networksetup-listnetworkserviceorder__network-info-script__1.txt")
    interfaces = {"bridge0": {"status": "active", "members": ["en2"]}}
    assert node_facts.bridge_state(interfaces, mp.parse_network_service_order(real))["service_enabled"] is True
    off = mp.parse_network_service_order(real.replace("(5) Thunderbolt Bridge", "(*) Thunderbolt Bridge"))
    assert node_facts.bridge_state(interfaces, off) == {"device": "bridge0", "active": True, "members": ["en2"],
                                                        "service_enabled": False}


def test_ring_advice_never_runs_the_ring_over_the_cable_it_says_to_unplug():
    # Two Macs joined by their only ports: the third can join a ring only over that cable, which it would
    # have to unplug to free them.
    hosts = [HostPorts("a", (1,), frozenset({1})), HostPorts("b", (1,), frozenset({1})), HostPorts("new", (1, 2))]
    advice = advise("new", hosts, [Cable(Port("a", 1), Port("b", 1))], "ring")
    assert not advice.possible and not advice.cables and not advice.unplug and not advice.ring
    roomy = [HostPorts("a", (1, 2), frozenset({1})), HostPorts("b", (1, 2), frozenset({1})), HostPorts("new", (1, 2))]
    advice = advise("new", roomy, [Cable(Port("a", 1), Port("b", 1))], "ring")
    assert [str(c) for c in advice.cables] == ["new:1 -- a:2", "new:2 -- b:2"] and not advice.unplug


@pytest.mark.parametrize("place", ["https://mirror.example.com/python-build-standalone/releases/download",
                                   PYTHON_BUILD_BASE + "-fork", "http://github.com/astral-sh/python-build-standalone/"
                                   "releases/download"])
def test_a_cpython_build_from_an_unknown_place_is_not_locked(place):
    def metadata(base):
        name = "cpython-3.12.16%2B20261110-aarch64-apple-darwin-install_only_stripped.tar.gz"
        return {"m16": {"name": "cpython", "arch": {"family": "aarch64", "variant": None}, "os": "darwin",
                        "libc": "none", "major": 3, "minor": 12, "patch": 16, "prerelease": "", "variant": None,
                        "build": "20261110", "url": f"{base}/20261110/{name}", "sha256": "2" * 64}}

    def sdist(base):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            body = json.dumps(metadata(base)).encode()
            info = tarfile.TarInfo("uv-0.13.9/crates/uv-python-managed/download-metadata.json")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        return buffer.getvalue()

    decl = {"python_version": "3.12", "uv_version": "0.13.9", "platforms": ["macos-arm64"]}
    for base, refused in ((PYTHON_BUILD_BASE, False), (place, True)):
        body = sdist(base)
        index = {"files": [{"filename": "uv-0.13.9.tar.gz", "url": "https://files/uv-0.13.9.tar.gz",
                            "hashes": {"sha256": hashlib.sha256(body).hexdigest()}}]}
        resolve = lambda: python_builds(decl, fetch=lambda url: index, download=lambda url: body)  # noqa: E731
        if refused:
            with pytest.raises(EnvLockError, match="unknown place"):
                resolve()
        else:
            assert [b["sha256"] for b in resolve()["builds"]] == ["2" * 64]


def test_a_link_to_a_marked_folder_is_never_cleared_through_the_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / env_node.VENV_MARKER).write_text("made by mlx-fleet\n")
    (real / "models").mkdir()
    link = tmp_path / "venv"
    link.symlink_to(real)
    assert env_node.folder_state(str(link), env_node.VENV_MARKER) == "foreign"
    module = SimpleNamespace(fail_json=lambda msg: (_ for _ in ()).throw(_Failed(msg)))
    with pytest.raises(_Failed, match="not made by mlx-fleet"):
        env_node.claim(module, str(link), env_node.VENV_MARKER, clear=True)
    assert sorted(os.listdir(real)) == [env_node.VENV_MARKER, "models"] and link.is_symlink()


def test_a_folder_at_mlx_env_path_mlx_fleet_did_not_make_is_not_swapped_out(tmp_path):
    venv, beside = tmp_path / "venv", tmp_path / ".venv.next"
    venv.mkdir()
    (venv / "notes.txt").write_text("the user's own")
    beside.mkdir()
    (beside / env_node.VENV_MARKER).write_text("made by mlx-fleet\n")
    Path(env_node.fingerprint_path(str(beside))).write_text(json.dumps({"digest": "new"}))
    args = {"path": str(venv), "built": {"next": str(beside), "path": str(venv), "digest": "new"}}
    result = run_module(mlx_env_switch.main, args, Commands({}))
    assert result["failed"] and not result.get("changed")
    assert sorted(os.listdir(venv)) == ["notes.txt"]
    assert sorted(os.listdir(beside)) == sorted([env_node.VENV_MARKER, "mlx-fleet.fingerprint.json"])


def test_two_ports_given_one_address_are_refused():
    hardware = mp.parse_hardware_ports(load(FIXTURE_DIR / "networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt"))
    one = {"hardware_port": "Thunderbolt 1", "device": "en2", "address": "192.168.77.1", "prefix": 30,
           "peer": "192.168.77.2"}
    two = {"hardware_port": "Thunderbolt 2", "device": "en3", "address": "192.168.77.5", "prefix": 30,
           "peer": "192.168.77.6"}
    assert [p["address"] for p in thunderbolt_services.check_ports([one, two], hardware)] == ["192.168.77.1",
                                                                                            "192.168.77.5"]
    with pytest.raises(thunderbolt_services.PlanError, match="192.168.77.1 is listed twice"):
        thunderbolt_services.check_ports([one, dict(two, address="192.168.77.1", peer="192.168.77.2")], hardware)


def test_ctrl_c_interrupts_the_playbook_waits_the_grace_then_kills_its_groups_never_the_cli_s(monkeypatch):
    me, mine = os.getpid(), os.getpgrp()
    # A helper in the CLI's own group, ansible-playbook in its session, and one of its workers (setsid).
    table = {90001: (me, mine), 90002: (me, 90002), 90003: (90002, 90003)}
    sent, clock = [], [100.0]
    monkeypatch.setattr(interrupt, "processes", lambda: dict(table))
    monkeypatch.setattr(interrupt.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(os, "kill", lambda pid, signum: sent.append(("kill", pid, signum)))
    monkeypatch.setattr(os, "killpg", lambda group, signum: sent.append(("killpg", group, signum)))
    with interrupt.Stopper(grace=5.0) as stopper:
        signal.raise_signal(signal.SIGINT)
        assert sorted(sent) == [("kill", 90001, signal.SIGINT), ("kill", 90002, signal.SIGINT)]
        clock[0] += 4.9
        assert stopper.cancel() is False and all(what[2] == signal.SIGINT for what in sent)
        clock[0] += 0.2
        assert stopper.cancel() is True
    killed = sorted(what[:2] for what in sent if what[2] == signal.SIGKILL)
    assert killed == [("kill", 90001), ("kill", 90002), ("kill", 90003), ("killpg", 90002), ("killpg", 90003)]
    assert ("killpg", mine) not in killed


@pytest.mark.parametrize("wait", [False, True])
def test_onboarding_with_a_cable_to_unplug_waits_before_it_converges(monkeypatch, tmp_path, wait):
    # Every advised cable already seen, but the plan moves a cable: the Mac is not converged until the
    # person did (without --wait-for-cables the command stops there; with it, the cables are read first).
    plan = {"model": "mini-m4-pro", "add": ["mini-1:1 -- new:2"], "seen": ["mini-1:1 -- new:2"],
            "unplug": ["mini-1:1 -- mini-2:1"]}
    ran = []

    def run_playbook(name, *args, **kwargs):
        ran.append(name)
        return SimpleNamespace(exit_status=0, result=lambda result: plan if name == "onboard" else None)

    monkeypatch.setattr(onboard.onboard_ssh, "which_ssh", lambda: None)
    monkeypatch.setattr(onboard, "_inventory_view", lambda inventories, name: ({}, None))
    monkeypatch.setattr(onboard.onboard_ssh, "resolve", lambda *a, **k: SimpleNamespace(needs_ansible_host=True))
    monkeypatch.setattr(onboard, "_trust", lambda target, fingerprint: ("key", True))
    monkeypatch.setattr(onboard, "_access", lambda *a: None)
    monkeypatch.setattr(onboard, "_new_host_file", lambda folder, name, host_vars: folder / "new.yml")
    monkeypatch.setattr(onboard, "print_plan", lambda plan: None)
    monkeypatch.setattr(onboard, "edit_inventory", lambda *a: {})  # {changed file: its backup}
    monkeypatch.setattr(onboard, "wait_for_cables", lambda *a: ran.append("cables") or False)
    monkeypatch.setattr(onboard.runner, "output_dir_from", lambda args: tmp_path)
    monkeypatch.setattr(onboard.runner, "run_playbook", run_playbook)
    args = SimpleNamespace(name="new", inventory=["inv.yml"], address="10.0.0.14", user=None, known_hosts=None,
                           identity=None, host_key_fingerprint=None, password_file=None, ask_become_pass=False,
                           verbose=0, passwordless_sudo=False, model=None, location=None, wait_for_cables=wait,
                           cable_timeout=60.0)
    monkeypatch.setattr(onboard.runner, "print_converge_summary", lambda report: EXIT_OK)
    assert onboard.run_onboard(args) == EXIT_ATTENTION
    assert ran == (["onboard", "cables"] if wait else ["onboard"])
