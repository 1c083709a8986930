"""The audit's comparison (plugin_utils.checks.audit), its report and the run record, on a converged 4-Mac ring:
each drift alone gives exactly its line, all of them together give all of them, a Mac that was not read is
named and left out, and a cluster that was never converged is all drift and no failure."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import audit_report
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.host import declared_state
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.run_record import record_facts
from mlx_fleet import record as records
from factories import ENV, FABRIC, HOSTFILE, INVENTORY, NODE, SHA, Cluster, audit, converged, lines, node

def test_converged_cluster_has_no_drift():
    result = audit(converged())
    assert result.findings == [] and result.not_audited == []
    # 4 Macs x (macOS, model, memory, serial, environment, Python, 3 packages, extras, 4 pmset, 2 names,
    # 2 wired limit, 3 addresses, bridge, RDMA, 2 hostfiles, automatic macOS installs) + 4 cables + the lock
    assert len(result.checks) == 4 * 26 + 4 + 1
    assert lines(converged())[1:] == []  # the headline only


def mlx_by_hand(s):
    node(s)["environment"]["installed"]["mlx"] = "0.32.3"


def extra_package(s):
    node(s)["environment"]["installed"]["six"] = "1.17.0"


def file_modified(s):
    node(s)["environment"]["records"]["mlx-lm"].update(modified=["mlx_lm/generate.py"], modified_count=1)


def macos_build(s):
    s[1]["mini-2"]["mlx_fleet_macos"]["build_version"] = "25C57"


def sleep_on(s):
    node(s)["pmset"]["AC Power"]["sleep"] = 10


def wired_limit(s):
    node(s)["wired_limit"]["now_mb"] = 8192


def bridge_on(s):
    s[1]["mini-2"]["mlx_fleet_thunderbolt"]["bridge"].update(active=True, service_enabled=True)


def address_changed(s):
    node(s)["addresses"]["en2"] = ["192.168.250.1/30"]


def cable_moved(s):
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    cluster.unplug("mini-2:2").unplug("mini-3:1").cable("mini-2:3", "mini-3:1")
    for host in ("mini-2", "mini-3"):
        for mine, new in zip(s[1][host]["mlx_fleet_thunderbolt"]["ports"], cluster.facts[host]["ports"]):
            mine.update({k: new[k] for k in ("connected", "peers", "speed_gbps", "speed_is_max")},
                        rdma_state="PORT_ACTIVE" if new["connected"] else "PORT_DOWN")


def rdma_off_after_update(s):
    macos_build(s)
    tb = s[1]["mini-2"]["mlx_fleet_thunderbolt"]
    tb.update(rdma_enabled=False, rdma_devices=[])
    for port in tb["ports"]:
        port.update(rdma_device=None, rdma_state=None)


def automatic_updates_on(s):
    node(s)["automatic_macos_updates"] = True


def hostfile_edited(s):
    node(s)["hostfiles"]["hostfile.json"] = "0" * 64


UPDATE = ("macOS: mini-2: expected 26.2 (25C56), as on mini-1, mini-3 and mini-4; found 26.2 (25C57)",
          "  fix: update macOS on mini-1, mini-3 and mini-4 to 26.2 (25C57) (one build on every Mac: RDMA breaks "
          "across mixed builds)")
DRIFTS = {
    mlx_by_hand: ["package mlx: mini-2: expected 0.32.4 (the lock); found 0.32.3", ENV],
    extra_package: ["extra packages: mini-2: expected none beyond the lock; found six 1.17.0", ENV],
    file_modified: ["package mlx-lm: mini-2: expected 0.32.2 with its files as installed; found 0.32.2 with "
                    "mlx_lm/generate.py modified (not as its RECORD lists them)", ENV],
    macos_build: list(UPDATE),
    sleep_on: ["pmset sleep: mini-2: expected 0; found 10", NODE],
    wired_limit: ["wired limit: mini-2: expected 16384 MB; found 8192 MB (the LaunchDaemon sets 16384 MB at boot)",
                  NODE],
    bridge_on: ["Thunderbolt Bridge: mini-2: expected off (service disabled, bridge0 inactive); found service "
                "enabled, bridge0 active", FABRIC],
    address_changed: ["Thunderbolt 1 address: mini-2: expected 192.168.184.166/30 (en2, address ledger); "
                      "found 192.168.250.1/30", FABRIC],
    cable_moved: ["cable mini-2:2 -- mini-3:1: mini-2, mini-3: expected cabled (as at the last converge); found "
                  "wrong port: mini-2:2 -- mini-3:1 is cabled as mini-2:3 -- mini-3:1",
                  "  fix: move the cable in mini-2 Thunderbolt 3 to Thunderbolt 2"],
    rdma_off_after_update: list(UPDATE) + [
        "RDMA: mini-2: expected ready (last seen ready 2026-11-29T17:51:16Z); found RDMA is off again after a macOS "
        "update: last seen ready on macOS 26.2 (25C56) at 2026-11-29T17:51:16Z, now macOS 26.2 (25C57) with RDMA "
        "disabled; the update switched it off: do the Recovery step again",
        "  fix: the Recovery checklist: mlx-fleet checklist -i inv/hosts.yml, then mlx-fleet converge -i inv/hosts.yml"],
    automatic_updates_on: ["automatic macOS installs: mini-2: expected off; found on",
                           NODE + " (then update macOS only with mlx-fleet os-update)"],
    hostfile_edited: ["hostfile.json: mini-2: expected the controller's (sha256 "
                      f"{SHA[:12]}); found sha256 000000000000", "  fix: mlx-fleet hostfile -i inv/hosts.yml"],
}


@pytest.mark.parametrize("drift", DRIFTS, ids=lambda f: f.__name__)
def test_each_drift_alone_gives_its_lines(drift):
    state = converged()
    base = converged()[3]["model"]
    drift(state)
    got = lines(state)
    assert got[1:] == DRIFTS[drift], got
    assert len(audit(state).findings) == (len(DRIFTS[drift]) + 1) // 2 and len(audit(state).checks) == 109
    assert state[3]["model"] == base  # the model is read, never changed


def test_all_drifts_together():
    state = converged()
    for drift in DRIFTS:
        if drift is not macos_build:  # rdma_off_after_update updates macOS too
            drift(state)
    got = lines(state)
    expected = [line for drift, out in DRIFTS.items() if drift is not macos_build for line in out]
    assert sorted(got[1:]) == sorted(expected)
    assert (len(audit(state).findings), len(audit(state).checks)) == (12, 109)


def test_a_mac_that_was_not_read_is_named_and_left_out():
    state = converged()
    del state[1]["mini-3"]["mlx_fleet_node"]
    result = audit(state)
    assert result.not_audited == ["mini-3"] and result.macs == ["mini-1", "mini-2", "mini-4"]
    assert result.findings == []
    assert not any("mini-3" in c.macs for c in result.checks)
    assert len(result.checks) == 3 * 26 + 2 + 1  # the cables to mini-3 are not judged


def test_never_converged_cluster_is_all_drift_and_no_failure():
    state = converged()
    hosts, observed, declared, controller = state
    for host in hosts:
        n = observed[host]["mlx_fleet_node"]
        n["environment"].update(exists=False, python=None, installed={}, records={})
        n["pmset"]["AC Power"].update(sleep=1, disksleep=10, autorestart=0)
        n["wired_limit"] = {"now_mb": 0, "daemon": {"path": "/Library/LaunchDaemons/x.plist", "present": False,
                                                    "value_mb": None, "loaded": False, "state": None}}
        n["addresses"] = {device: [] for device in n["addresses"]}
        n["hostfiles"] = {"hostfile.json": None, "hostfile-ring.json": None}
        n["automatic_macos_updates"] = None  # never set: System Settings' choice
        observed[host]["mlx_fleet_thunderbolt"]["bridge"].update(active=True, service_enabled=True)
    controller.update(hostfiles={"hostfile.json": None, "hostfile-ring.json": None}, model=None,
                      rdma_ledger={"format": rdma.LEDGER_FORMAT, "nodes": {}})
    got = lines(state)
    # per Mac: macOS, model, memory, environment, 4 pmset, 2 names, 2 wired limit, 3 addresses, bridge, automatic
    # macOS installs (no ledger: no serial, RDMA or address expected; no hostfile on the controller: none on the
    # Macs either)
    result = audit(state)
    assert (len(result.findings), len(result.checks)) == (33, 70) and got[1:]  # merged across the Macs
    drifts: dict[tuple, list[str]] = {}  # (fact, expected, found) -> the Macs
    for f in result.findings:
        drifts.setdefault((f.fact, f.expected, f.found), []).extend(f.hosts)
    every = list(state[0])
    assert drifts[("automatic macOS installs", "off", "not set")] == every
    assert [macs for (fact, expected, found), macs in drifts.items()
            if fact == "environment" and found.startswith("none at ")] == [every]
    assert drifts[("hostfile.json on the controller", "written by mlx-fleet converge", "none")] == []
    assert [macs for (fact, expected, found), macs in drifts.items()
            if fact == "wired-limit LaunchDaemon" and found == "absent"] == [every]
    assert {f.kind for f in result.findings} == {"drift"}


def test_lock_that_does_not_match_the_inventory():
    state = converged()
    for d in state[2].values():
        d["declaration"]["mlx_version"] = "0.33.0"
    (lock,) = audit(state).findings  # packages are not judged against a stale lock
    assert (lock.fact, lock.hosts) == ("environment lock", ()) and "mlx_env_mlx_version='0.33.0'" in lock.found


def test_report_json_html_and_record(tmp_path):
    state = converged()
    sleep_on(state)
    node(state, "mini-1")["names"]["ComputerName"] = "<b>mini</b>"
    result = audit(state)
    report, json_path, html_path = audit_report.write(tmp_path, result, generated="2026-11-30T10:00:00Z",
                                                      inventory=INVENTORY)
    assert json.loads(json_path.read_text()) == report
    assert report["format"] == "mlx-fleet-audit/1" and report["drift"] == 2 and report["facts_compared"] == 109
    assert {f["fact"] for f in report["findings"]} == {"pmset sleep", "computer name"}
    html = html_path.read_text()
    assert html.count('<td class="drift">') == 2 and "&lt;b&gt;mini&lt;/b&gt;" in html and "<b>mini" not in html

    facts = record_facts(result.macs, state[1], {h: "mini-m4-pro" for h in result.macs}, HOSTFILE)
    assert facts["cluster"]["backend"] == "jaccl-ring" and facts["cluster"]["hostfile"]["sha256"] == SHA
    assert [c["cable"] for c in facts["cluster"]["cables"]][0] == "mini-1:1 -- mini-2:1"
    assert facts["macs"]["mini-2"]["packages"]["mlx"] == {"version": "0.32.4", "files_sha256": "mlx" * 4}


def test_record_diff_names_only_what_changed(tmp_path):
    state = converged()
    facts = record_facts(list(state[1]), state[1], {}, HOSTFILE)
    a = records.build(facts, inventory=tmp_path, output_dir=tmp_path / ".mlx-fleet", recorded_at="T1", not_recorded=[])
    b = records.build(copy.deepcopy(facts), inventory=tmp_path, output_dir=tmp_path / ".mlx-fleet", recorded_at="T2",
                      not_recorded=[])
    assert records.diff(a, b) == ["recorded_at: T1 -> T2"]
    b["macs"]["mini-2"]["packages"]["mlx"]["version"] = "0.32.5"
    assert records.diff(a, b) == ["recorded_at: T1 -> T2", "macs.mini-2.packages.mlx.version: 0.32.4 -> 0.32.5"]
    assert "| mini-2 | 26.2 (25C56) | Mac16,11 | SERIAL0001 | 64 GB | 3.12.12 | 0.32.4 | 0.32.2 | 3 |" \
        in records.markdown(a)
    b["cluster"]["rdma"]["mini-2"] = "needs_recovery"
    rows = {line.split(" | ")[0]: line for line in records.markdown(b).splitlines() if line.startswith("| mini-")}
    assert rows["| mini-1"].endswith(" | ready |") and rows["| mini-2"].endswith(" | off: Recovery step to do |")


def test_cluster_checks_name_no_mac():
    state = converged()
    state[3]["hostfiles"] = {"hostfile.json": None, "hostfile-ring.json": None}
    assert [(f.kind, f.hosts) for f in audit(state).findings] == [("drift", ())]


def test_cables_against_a_declared_plan():
    state = converged()
    plan = declared_state({"mlx_fleet_cables": sorted(str(link.cable) for link in state[3]["model"].links)},
                          lambda value, variables, role: value, lambda value: value)
    assert plan["cables"][0] == [["mini-1", 1], ["mini-2", 1]] and plan["cable_problems"] == []
    for d in state[2].values():
        d.update(cables=plan["cables"], cable_problems=plan["cable_problems"])
    assert audit(state).findings == []
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    cluster.unplug("mini-3:2").unplug("mini-4:1").cable("mini-1:3", "mini-3:3")
    for host in ("mini-1", "mini-3", "mini-4"):
        for mine, new in zip(state[1][host]["mlx_fleet_thunderbolt"]["ports"], cluster.facts[host]["ports"]):
            mine.update({k: new[k] for k in ("connected", "peers", "speed_gbps", "speed_is_max")})
    drifts = {f.fact: f for f in audit(state).findings}
    missing, extra = (drifts[f"cable {parse_cable(text)}"] for text in ("mini-3:2 -- mini-4:1", "mini-1:3 -- mini-3:3"))
    assert (missing.hosts, missing.found) == (("mini-3", "mini-4"), "missing")
    assert missing.fix == f"connect {port_name(Port('mini-3', 2))} to {port_name(Port('mini-4', 1))}"
    assert extra.hosts == ("mini-1", "mini-3") and extra.found.startswith("extra: ")
    assert extra.fix == "unplug it or add it to the plan"


def test_record_git_state(tmp_path):
    repo = tmp_path / "lab"
    (repo / "inventory").mkdir(parents=True)
    (repo / "inventory" / "hosts.yml").write_text("all: {}\n")

    def git(*args):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "inventory")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = repo / "inventory" / ".mlx-fleet"
    out.mkdir()
    (out / "audit.json").write_text("{}")  # the output folder is not the inventory
    assert records.git_state(repo / "inventory", out) == {"commit": head, "dirty": False}
    (repo / "inventory" / "hosts.yml").write_text("all: {hosts: {}}\n")
    assert records.git_state(repo / "inventory", out) == {"commit": head, "dirty": True}
    assert records.git_state(tmp_path / "elsewhere") is None


def test_probe_checks_every_installed_file_against_its_record(tmp_path):
    """The environment's Python (PROBE verify) names a file edited after the install, and files_sha256 ignores
    the installer's notes about the install."""
    import base64
    import sys

    from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import PROBE

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    module, info = site / "tiny.py", site / "tiny-1.0.dist-info"
    info.mkdir()
    module.write_text("VALUE = 1\n")
    data = site / "tiny.txt"
    data.write_text("data\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Tiny\nVersion: 1.0\n")

    def line(path):
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        return f"{path.relative_to(site)},sha256={digest},{path.stat().st_size}"

    def install(installer: str) -> None:
        (info / "INSTALLER").write_text(installer)
        rows = [line(module), line(data), line(info / "METADATA"), line(info / "INSTALLER"), "tiny-1.0.dist-info/RECORD,,"]
        (info / "RECORD").write_text("\n".join(rows) + "\n")

    def probe() -> dict:
        out = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-I", "-c", PROBE, "installed", "verify"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    install("uv")
    first = probe()
    assert first["installed"]["tiny"] == "1.0"
    assert first["records"]["tiny"] == {"files_sha256": first["records"]["tiny"]["files_sha256"], "checked": 4,
                                        "modified": [], "missing": [], "modified_count": 0, "missing_count": 0}
    install("pip")
    assert probe()["records"]["tiny"]["files_sha256"] == first["records"]["tiny"]["files_sha256"]
    module.write_text("VALUE = 2\n")
    data.unlink()
    edited = probe()["records"]["tiny"]
    assert (edited["modified"], edited["missing"], edited["checked"]) == (["tiny.py"], ["tiny.txt"], 3)


def test_record_says_the_command_is_recorded_not_run(tmp_path, monkeypatch, capsys):
    from mlx_fleet import audit_cli, cli, runner

    state = converged()
    facts = record_facts(list(state[1]), state[1], {}, HOSTFILE)
    monkeypatch.setattr(audit_cli, "_audit", lambda args, name: (runner.RunReport(playbook="p"), {"record": facts}))
    (tmp_path / "inventory.yml").write_text("all: {}\n")
    argv = ["record", "-i", str(tmp_path / "inventory.yml"), "--out", str(tmp_path / "r.json")]
    assert cli.main(argv + ["--", "mlx.launch", "--hostfile", "h.json", "train.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "command recorded, not run: mlx.launch --hostfile h.json train.py (start it yourself)"
    assert json.loads((tmp_path / "r.json").read_text())["command"]["text"] == "mlx.launch --hostfile h.json train.py"
    assert cli.main(argv) == 0
    assert "not run" not in capsys.readouterr().out  # no command, nothing to say about one


SERVICES = [{"name": n, "enabled": n != "Thunderbolt Bridge", "order": o, "hardware_port": n, "device": d}
            for n, o, d in (("Ethernet", 1, "en0"), ("Wi-Fi", 2, "en1"), ("Thunderbolt Bridge", None, "bridge0"),
                            ("Thunderbolt 1", 3, "en2"), ("Thunderbolt 2", 4, "en3"))]


def with_network():
    """converged(), read by a node_state that reports the service order, the default route and other network
    managers, and with the controller's hostfile environment."""
    state = converged()
    for host in state[0]:
        node(state, host).update(services=[dict(s) for s in SERVICES], default_route="en0", competing=[],
                                 filevault=False)
    state[3]["hostfile_envs"] = []
    return state


def test_the_network_checks_users_reports_asked_for():
    state = with_network()
    assert (audit(state).findings, len(audit(state).checks)) == ([], 126)  # 109 + 4 per Mac + the hostfile's env
    services = node(state)["services"]
    services.insert(0, services.pop(3))  # Thunderbolt 1 first
    node(state)["default_route"] = "bridge0"
    node(state)["competing"] = ["io.exo.networksetup"]
    node(state)["filevault"] = True
    state[3]["hostfile_envs"] = ["MLX_METAL_FAST_SYNCH=1"]
    found = audit(state).findings
    assert [(f.fact, f.hosts) for f in found] == [
        ("MLX_METAL_FAST_SYNCH in the hostfile's environment", ()), ("service order", ("mini-2",)),
        ("default route", ("mini-2",)), ("FileVault", ("mini-2",)), ("other network managers", ("mini-2",))]
    assert found[0].found.startswith("MLX_METAL_FAST_SYNCH=1 ") and found[3].fix.startswith("on mini-2: ")
    # the service order and the default route have one fix: Thunderbolt after the others
    assert found[1].fix == found[2].fix == ("sudo networksetup -ordernetworkservices Ethernet Wi-Fi 'Thunderbolt 1' "
                                            "'Thunderbolt Bridge' 'Thunderbolt 2'")
    assert "io.exo.networksetup" in found[4].found and "io.exo.networksetup" in found[4].fix


def test_a_cabled_rdma_port_without_its_ipv4_mapped_gid():
    state = with_network()
    for host in state[0]:  # as the module reads them with ibv_devinfo -v: each port's GIDs for its addresses
        for port in state[1][host]["mlx_fleet_thunderbolt"]["ports"]:
            port["addresses"] = node(state, host)["addresses"][port["device"]]
            port["rdma_gids"] = ["fe80::1"] + [f"::ffff:{a.split('/')[0]}" for a in port["addresses"]]
    clean = lines(state)
    assert len(clean) == 1 and clean[0].startswith("no drift: ")
    port = next(p for p in state[1]["mini-2"]["mlx_fleet_thunderbolt"]["ports"] if p["connected"])
    port["rdma_gids"] = ["fe80::1"]  # the address removed by hand: the port publishes no IPv4-mapped GID
    (gid,) = audit(state).findings
    assert (gid.fact, gid.hosts) == (f"{port['rdma_device']} IPv4-mapped GID", ("mini-2",))
    assert f"::ffff:{port['addresses'][0].split('/')[0]}" in gid.found and "mlx-fleet converge" in gid.fix


def test_a_port_cabled_to_a_mac_outside_the_cluster_needs_no_ipv4_mapped_gid():
    # mini-2's port to a Mac the inventory does not list: connected, RDMA on, no address from the fabric,
    # so no GID either; no job runs over it, so there is nothing to say.
    state = with_network()
    for host in state[0]:
        for port in state[1][host]["mlx_fleet_thunderbolt"]["ports"]:
            port["addresses"] = node(state, host)["addresses"][port["device"]]
            port["rdma_gids"] = ["fe80::1"] + [f"::ffff:{a.split('/')[0]}" for a in port["addresses"]]
    free = next(p for p in state[1]["mini-2"]["mlx_fleet_thunderbolt"]["ports"]
                if not p["connected"] and p.get("rdma_device"))
    free.update(connected=True, addresses=[], rdma_gids=["fe80::2"])
    node(state, "mini-2")["addresses"][free["device"]] = []
    found = lines(state)
    assert not [line for line in found if "IPv4-mapped GID" in line], found


def test_a_cable_the_inventory_misspells_is_a_finding_not_a_crash():
    state = converged()
    plan = declared_state({"mlx_fleet_cables": ["mini-1:1 -- mini-2:1", "mini-2 3 -- mini-3:1"]},
                          lambda value, variables, role: value, lambda value: value)
    assert plan["cables"] == [[["mini-1", 1], ["mini-2", 1]]]
    assert plan["cable_problems"] == ["mlx_fleet_cables: cable end 'mini-2 3' is not host:port (port = Thunderbolt "
                                      "receptacle number)"]
    for d in state[2].values():
        d.update(cables=plan["cables"], cable_problems=plan["cable_problems"])
    wrong = [f for f in audit(state).findings if f.fact == "mlx_fleet_cables"]
    assert [(f.kind, f.hosts, f.found) for f in wrong] == [("drift", (), plan["cable_problems"][0])]


PINNED = {"manifests": [{"name": "tiny", "source": "path", "files": [
    {"path": "config.json", "size": 2, "sha256": "a" * 64},
    {"path": "model.safetensors", "size": 10, "sha256": "b" * 64}]}], "not_pinned": ["hubby"], "changed_folders": {}}


def held(*states, deep=True) -> dict:
    """A Mac's mlx_fleet_model_files: tiny's two files in STATES (config.json, model.safetensors)."""
    files = [{"path": p, "state": s, "size": None} for p, s in zip(("config.json", "model.safetensors"), states)]
    return {"deep": deep, "models": [{"name": "tiny", "root": "/opt/mlx-fleet/models/tiny", "free_bytes": 100,
                                      "present": all(s == "ok" for s in states), "files": files}]}


def test_the_declared_models_on_every_mac_name_the_mac_and_the_file_that_drifted():
    state = converged()
    state[3]["models"] = PINNED
    for mac in ("mini-1", "mini-3"):
        state[1][mac]["mlx_fleet_model_files"] = held("ok", "ok")
    state[1]["mini-2"]["mlx_fleet_model_files"] = held("ok", "hash_differs")
    state[1]["mini-4"]["mlx_fleet_model_files"] = held("missing", "missing")
    result = audit(state)
    drifted = sorted((f.kind, f.hosts, f.fact, f.found) for f in result.findings)
    assert drifted == [("model-file-differs", ("mini-2",), "model tiny: model.safetensors", "other bytes"),
                       ("model-missing", ("mini-4",), "model tiny", "absent"),
                       ("model-not-pinned", (), "model hubby", "not pinned")]
    fixes = {f.kind: f.fix for f in result.findings}
    assert fixes["model-file-differs"] == "mlx-fleet models sync -i inv/hosts.yml"
    assert fixes["model-not-pinned"] == "mlx-fleet lock -i inv/hosts.yml"
    models = [c for c in result.checks if c.topic == "models"]
    assert sorted((c.macs[0], c.ok) for c in models if c.fact == "model tiny") == [
        ("mini-1", True), ("mini-3", True), ("mini-4", False)]
    report = result.to_dict("now", INVENTORY)
    assert {(f["kind"], f["fact"]) for f in report["findings"]} == {
        ("model-file-differs", "model tiny: model.safetensors"), ("model-missing", "model tiny"),
        ("model-not-pinned", "model hubby")}


def test_without_declared_models_the_audit_compares_none():
    state = converged()
    assert not [c for c in audit(state).checks if c.topic == "models"]
    state[3]["models"] = {"manifests": [], "not_pinned": [], "changed_folders": {}}
    assert not [c for c in audit(state).checks if c.topic == "models"]


def test_the_record_lists_each_model_with_its_source_files_and_macs_and_diff_names_a_changed_one(tmp_path):
    state = converged()
    hub = {"name": "qwen", "source": "hub", "repo": "org/qwen", "repo_type": "model", "revision": "main",
           "commit": "c" * 40, "files": [{"path": "model.safetensors", "size": 10, "sha256": "d" * 64}]}
    pinned = dict(PINNED, manifests=PINNED["manifests"] + [hub], folders={"tiny": "/data/tiny"})
    for mac in state[1]:
        state[1][mac]["mlx_fleet_model_files"] = held("ok", "ok")
        state[1][mac]["mlx_fleet_model_files"]["models"].append(
            {"name": "qwen", "root": "/x", "free_bytes": 1, "present": True, "ref": "ok", "ref_commit": "c" * 40,
             "files": [{"path": "model.safetensors", "state": "ok", "size": 10}]})
    state[1]["mini-3"]["mlx_fleet_model_files"] = held("ok", "hash_differs")
    facts = record_facts(list(state[1]), state[1], {}, HOSTFILE, pinned)
    models = facts["models"]
    assert models["tiny"]["source"] == {"path": "/data/tiny"}
    assert models["tiny"]["files"]["model.safetensors"] == {"size": 10, "sha256": "b" * 64}
    assert models["tiny"]["macs"] == {"mini-1": "verified", "mini-2": "verified", "mini-3": "not present",
                                      "mini-4": "verified"}
    assert models["qwen"]["source"] == {"repo": "org/qwen", "repo_type": "model", "revision": "main",
                                        "commit": "c" * 40}
    assert models["qwen"]["macs"]["mini-3"] == "not present"  # held() gave mini-3 no qwen
    assert models["hubby"] == {"source": None, "files": {}, "macs": {}}

    a = records.build(facts, inventory=tmp_path, output_dir=tmp_path / ".mlx-fleet", recorded_at="T1", not_recorded=[])
    b = copy.deepcopy(a)
    b["models"]["qwen"]["source"]["commit"] = "e" * 40
    b["models"]["tiny"]["files"]["model.safetensors"]["sha256"] = "f" * 64
    assert [key for key, old, new in records.changes(a, b)] == [
        "models.qwen.source.commit", "models.tiny.files.model.safetensors.sha256"]
    assert "- model qwen: org/qwen at main (cccccccccccc), 1 files, 10 bytes; verified on mini-1, mini-2, mini-4; " \
           "not present on mini-3" in records.markdown(a)
