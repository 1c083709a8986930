"""plugin_utils.rdma.readiness and plugin_utils.render.checklist: readiness classes with their exact lines, the summary from
the fabric's own backend choice, the ledger, and the rendered checklist (text line by line, HTML escaped)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import checklist
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from factories import REPO, ReadinessCluster, expected_text, minis

# --- classes ---------------------------------------------------------------------------------------


def ports(assessment, host: str) -> list[tuple]:
    """A Mac's cabled ports as RDMA sees them: (its number, the Mac at the other end, what RDMA does there)."""
    assert all(p.port.host == host for p in assessment.nodes[host].ports)
    return [(p.port.receptacle, p.peer, p.outcome) for p in assessment.nodes[host].ports]


def test_two_macs_need_the_recovery_step_and_the_others_wait_for_them():
    a = minis(disabled=("mini-3", "mini-4")).mesh().assess()
    assert {h: r.status for h, r in a.nodes.items()} == {
        "mini-1": "ready", "mini-2": "ready", "mini-3": "needs_recovery", "mini-4": "needs_recovery"}
    assert ports(a, "mini-1") == [(1, "mini-2", "active"), (2, "mini-3", "waiting"), (3, "mini-4", "waiting")]
    assert (a.nodes["mini-3"].model, a.nodes["mini-3"].product_version, a.nodes["mini-3"].ports) == (
        "mini-m4-pro", "26.2", [])
    assert (a.current, a.projected) == ("ring", "jaccl")
    assert (a.backend, a.blocked) == ("auto", False)


def test_all_ready():
    a = minis(3).mesh().assess()
    assert all(r.status == "ready" for r in a.nodes.values())
    assert ports(a, "mini-2") == [(1, "mini-1", "active"), (2, "mini-3", "active")]
    assert (a.current, a.projected) == ("jaccl", "jaccl")


def test_a_ring_gains_jaccl_ring():
    c = minis(4, disabled=("mini-2",))
    for a, b in (("mini-1:1", "mini-2:1"), ("mini-2:2", "mini-3:1"), ("mini-3:2", "mini-4:1"), ("mini-4:2", "mini-1:2")):
        c.cable(a, b)
    a = c.assess()
    assert (a.hosts("needs_recovery"), a.current, a.projected) == (["mini-2"], "ring", "jaccl-ring")


def test_thunderbolt_4_mac_is_not_capable_and_never_sent_to_recovery():
    c = ReadinessCluster({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro", "mini-3": "mini-m4"},
                disabled=("mini-2", "mini-3")).mesh()
    a = c.assess()
    assert a.nodes["mini-3"].status == "not_capable"
    assert (a.nodes["mini-3"].reason, a.nodes["mini-3"].model) == ("thunderbolt 4", "mini-m4")
    assert a.hosts("needs_recovery") == ["mini-2"]
    assert (a.current, a.projected) == ("ring", "ring")  # mini-3 keeps the cluster on ring
    # Its model alone tells, even with RDMA devices listed (Thunderbolt 4 Macs list them yet fail).
    c.tb["mini-3"].update(rdma_enabled=True, rdma_devices=["rdma_en2"])
    assert c.assess().nodes["mini-3"].status == "not_capable"
    # Without mlx_fleet_model, the model identifier says it.
    assert rdma.assess(c.macos, c.tb).nodes["mini-3"].reason == "thunderbolt 4"


def test_old_macos_is_not_capable():
    c = minis(2, disabled=("mini-2",), version=("26.1", "25B78")).mesh()
    old = c.assess().nodes["mini-2"]
    assert (old.status, old.reason, old.product_version) == ("not_capable", "macos", "26.1")
    c.macos["mini-2"].update(product_version="26.2", build_version="25C56")
    c.tb["mini-2"]["rdma_enabled"] = None  # no rdma_ctl on PATH
    without = c.assess().nodes["mini-2"]
    assert (without.status, without.reason, without.rdma_status) == ("not_capable", "no rdma_ctl", None)


def test_an_unread_macos_version_is_no_verdict_on_it():
    c = minis(2).mesh()
    for key in ("product_version", "build_version"):
        c.macos["mini-2"].pop(key)
    assert c.assess().nodes["mini-2"].status == "ready"  # judged on its RDMA state, never called too old


def test_enabled_but_port_down_names_the_port_causes_and_remedy():
    c = minis(3).mesh()
    for host, n in (("mini-1", 2), ("mini-3", 1)):  # the mini-1 -- mini-3 cable
        c.tb[host]["ports"][n - 1]["rdma_state"] = "PORT_DOWN"
    a = c.assess()
    assert a.nodes["mini-1"].status == "enabled_not_working"
    assert ports(a, "mini-1") == [(1, "mini-2", "active"), (2, "mini-3", "down")]
    assert [(p.rdma_device, p.rdma_state) for p in a.nodes["mini-1"].ports if p.outcome == "down"] == [
        ("rdma_en3", "PORT_DOWN")]
    assert (a.hosts("needs_recovery"), a.hosts("enabled_not_working"), a.current) == ([], ["mini-1", "mini-3"], "ring")


def test_enabled_without_devices():
    c = minis(2).mesh()
    c.tb["mini-2"]["rdma_devices"] = []
    node = c.assess().nodes["mini-2"]
    assert (node.status, node.rdma_devices, node.ports) == ("enabled_not_working", [], [])


def test_mac_studio_port_beside_ethernet():
    c = ReadinessCluster({"studio-1": "studio-m3-ultra", "studio-2": "studio-m3-ultra"}).cable("studio-1:1", "studio-2:2")
    c.tb["studio-1"]["ports"][0]["rdma_state"] = "PORT_DOWN"
    a = c.assess()
    assert a.nodes["studio-1"].status == "enabled_not_working"
    assert ports(a, "studio-1") == [(1, "studio-2", "broken port")]


def test_jaccl_blocks_with_the_nodes_named():
    a = minis(disabled=("mini-3", "mini-4")).mesh().assess(backend="jaccl")
    assert (a.blocked, a.hosts("needs_recovery"), a.hosts("not_capable")) == (True, ["mini-3", "mini-4"], [])
    assert not minis(3).mesh().assess(backend="jaccl").blocked


# --- ledger ----------------------------------------------------------------------------------------


def test_ledger_records_ready_macs_and_notices_an_update_that_switched_rdma_off():
    c = minis(2).mesh()
    t0 = datetime(2026, 10, 1, 9, 0, tzinfo=timezone.utc)
    ledger, changed = rdma.update_ledger({"format": rdma.LEDGER_FORMAT, "nodes": {}}, c.assess(), now=t0)
    assert changed
    assert ledger["nodes"]["mini-2"] == {"last_seen_ready": "2026-10-01T09:00:00Z", "product_version": "26.2",
                                         "build_version": "25C56", "serial_number": "SERIAL0002"}
    # Seen again, later: the times move, nothing else; not a change.
    again, changed = rdma.update_ledger(ledger, c.assess())
    assert not changed and again["nodes"]["mini-2"]["last_seen_ready"] != "2026-10-01T09:00:00Z"

    after = minis(2, disabled=("mini-2",)).mesh()
    after.macos["mini-2"].update(product_version="26.3", build_version="25D60")
    a = after.assess()
    assert rdma.note_regressions(a, ledger) == [
        "mini-2: RDMA is off again after a macOS update: last seen ready on macOS 26.2 (25C56) at 2026-10-01T09:00:00Z, "
        "now macOS 26.3 (25D60) with RDMA disabled; the update switched it off: do the Recovery step again"]
    same = minis(2, disabled=("mini-2",)).mesh().assess()
    assert rdma.note_regressions(same, ledger) == [
        "mini-2: RDMA is off again: last seen ready at 2026-10-01T09:00:00Z on the same macOS 26.2 (25C56); someone "
        "disabled it in Recovery or the NVRAM was reset: do the Recovery step again"]


def test_ledger_that_is_not_one(tmp_path):
    (tmp_path / rdma.LEDGER_FILE).write_text("[]")
    with pytest.raises(ValueError, match="not an RDMA ledger"):
        rdma.read_ledger(tmp_path / rdma.LEDGER_FILE)


# --- the checklist ---------------------------------------------------------------------------------


def test_text_checklist_line_by_line(tmp_path):
    c = minis(disabled=("mini-3", "mini-4")).mesh()
    a = c.assess(locations={"mini-3": "Rack A, shelf 2"})
    written = checklist.write(tmp_path, a, inventory="/srv/inv.yml", generated="2026-11-29 18:00 UTC",
                              addresses={h: m["management_address"] for h, m in c.macos.items()})
    got = written.text.read_text().split("\n")
    want = expected_text([
        {"host": "mini-3", "location": "Rack A, shelf 2", "serial": "SERIAL0003", "address": "10.0.0.13"},
        {"host": "mini-4", "location": "not given (mlx_fleet_location)", "serial": "SERIAL0004", "address": "10.0.0.14"},
    ], "/srv/inv.yml", "2026-11-29 18:00 UTC").split("\n")
    for number, (line, expected) in enumerate(zip(got, want), 1):
        assert line == expected, f"line {number}"
    assert len(got) == len(want)
    assert max(len(line) for line in got) <= 72
    html = written.html.read_text()
    assert html.count('<section class="sheet"') == 2 and "break-after: page" in html
    assert [m for m in re.findall(r'class="serial">([^<]*)<', html)] == ["SERIAL0003", "SERIAL0004"]
    ledger = json.loads(written.ledger.read_text())
    assert sorted(ledger["nodes"]) == ["mini-1", "mini-2"]


def test_rerun_on_an_unchanged_cluster_keeps_the_sheets(tmp_path):
    a = minis(disabled=("mini-3",)).mesh().assess()
    first = checklist.write(tmp_path, a, inventory="i.yml", generated="2026-11-29 18:00 UTC")
    assert first.changed
    second = checklist.write(tmp_path, a, inventory="i.yml", generated="2026-11-30 08:00 UTC")
    assert not second.changed
    assert "State read 2026-11-29 18:00 UTC" in second.text.read_text()


def test_check_mode_writes_nothing(tmp_path):
    a = minis(disabled=("mini-3",)).mesh().assess()
    checklist.write(tmp_path / "out", a, inventory="i.yml", generated="now", write_files=False)
    assert not (tmp_path / "out").exists()


def test_html_escapes_inventory_text(tmp_path):
    a = minis(2, disabled=("mini-2",)).mesh().assess(locations={"mini-2": "<b>rack</b> & shelf"})
    html = checklist.write(tmp_path, a, inventory="i.yml", generated="now").html.read_text()
    assert "&lt;b&gt;rack&lt;/b&gt; &amp; shelf" in html and "<b>rack" not in html


def test_no_mac_needs_the_step(tmp_path):
    written = checklist.write(tmp_path, minis(2).mesh().assess(), inventory="i.yml", generated="now")
    assert "No Mac needs the Recovery step." in written.text.read_text().split("\n")
    assert '<section class="sheet"' in written.html.read_text()


# --- nothing in the toolkit tries to enable RDMA ---------------------------------------------------

# What runs on a Mac or tells a Mac what to run; plugin_utils (controller-only) may name the step in the
# text it prints for a person, but never as a command token.
PRODUCT = ["site.yml", "playbooks", "roles", "plugins/modules", "plugins/module_utils", "plugins/action"]
ENABLE = re.compile(r"rdma_ctl\W{0,4}enable", re.IGNORECASE)
COMMAND_TOKEN = re.compile(r"[\"']rdma_ctl[\"']")


def test_no_product_code_runs_rdma_ctl_enable():
    offenders = []
    for entry in PRODUCT:
        root = REPO / entry
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            if "templates" in path.relative_to(REPO).parts or path.suffix in (".pyc",):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if ENABLE.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    for path in sorted((REPO / "plugins" / "plugin_utils").glob("*.py")):
        offenders += [f"{path.name}: {line.strip()}" for line in path.read_text().splitlines() if COMMAND_TOKEN.search(line)]
    assert offenders == []
