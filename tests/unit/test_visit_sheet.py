"""The onboarding visit sheet (plugin_utils.render.visit_sheet): cables with both ends, Recovery when needed."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import visit_sheet
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.cable_advice import Advice
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS

MACOS = {"model_name": "Mac Studio", "chip": "Apple M3 Ultra", "model_identifier": "Mac15,14",
         "serial_number": "D6WY33LLJM", "product_version": "26.2", "build_version": "25C56",
         "management_address": "10.0.1.24"}


def _sheet(needs_recovery: bool, notes=(), macos=MACOS) -> visit_sheet.Sheet:
    studio = MODELS["studio-m3-ultra"]
    advice = Advice("jaccl", "full mesh", cables=[Cable(Port("studio-4", 2), Port("studio-1", 4)),
                                                  Cable(Port("studio-4", 3), Port("studio-2", 4))])
    return visit_sheet.Sheet(
        host="studio-4", macos=macos, model=studio, location="Rack A, shelf 4", advice=advice,
        needs_recovery=needs_recovery, notes=list(notes), models={f"studio-{i}": studio for i in (1, 2, 4)},
        locations={"studio-1": "Rack A, shelf 1"}, devices={Port("studio-4", 2): "en3", Port("studio-1", 4): "en5"},
        afterwards=["mlx-fleet onboard -i inv studio-4 --address 10.0.1.24 --wait-for-cables"])


def _render(sheet):
    return visit_sheet.render(visit_sheet.context(sheet, inventory="inv", output_dir="out", generated="2026-11-30 16:00 UTC"))


def test_the_sheet_lists_each_cable_with_both_ends_and_where_the_ports_are():
    html, text = _render(_sheet(needs_recovery=False, notes=["studio-4 runs macOS 26.3 <beta> & the cluster 26.2"]))
    assert "[ ] 1. Connect studio-4 Thunderbolt 2 to studio-1 Thunderbolt 4\n" \
           "       studio-4 Thunderbolt 2 (en3), Rack A, shelf 4 -- studio-1\n" \
           "       Thunderbolt 4 (en5), Rack A, shelf 1\n" in text
    assert "[ ] 2. Connect studio-4 Thunderbolt 3 to studio-2 Thunderbolt 4\n" in text
    assert "Thunderbolt 1 is the one on the back beside Ethernet" in text
    assert "Bring 2 Thunderbolt 5 cables." in text and "Serial number:  D6WY33LLJM" in text
    assert "RECOVERY" not in text and "Recovery" not in html
    assert "[ ] mlx-fleet onboard -i inv studio-4 --address 10.0.1.24 --wait-for-cables" in text
    assert "Connect <code>studio-4 Thunderbolt 2</code> to <code>studio-1 Thunderbolt 4</code>" in html
    assert "&lt;beta&gt; &amp; the cluster" in html  # inventory and Mac text is escaped
    assert all(len(line) <= 72 for line in text.splitlines() if not line.startswith("[ ] mlx-fleet"))


def test_a_mac_that_needs_rdma_gets_the_recovery_step_on_the_same_sheet():
    html, text = _render(_sheet(needs_recovery=True))
    assert "ENABLE RDMA IN macOS RECOVERY, AT studio-4" in text
    assert "[ ] 6. Type rdma_ctl enable and press Return." in text
    assert "the power button (on the back, beside the power cord)" in html
    assert "Bring a display, keyboard and mouse" in html
    assert "<h2>Enable RDMA in macOS Recovery, at studio-4</h2>" in html
    assert "Recovery is the way Apple documents for RDMA (TN3205, macOS 26.2 and later)." in html


# Recovery (Apple TN3205) from macOS 26.2; no source ties WWDC26's System Settings switch to a version, so a
# later macOS, and a Mac whose version was not read, get Recovery too (docs/recovery/README.md).
@pytest.mark.parametrize("version", ["26.2", "26.3.1", "26.5", "27.0", "27.1", ""])
def test_the_sheet_gives_the_way_to_enable_rdma_for_the_macs_own_macos(version):
    node = visit_sheet.context(_sheet(True, macos=dict(MACOS, product_version=version)), inventory="inv",
                               output_dir="out", generated="2026-11-30 16:00 UTC")["node"]
    assert node["enable_path"] == "recovery"
    assert visit_sheet.context(_sheet(False), inventory="inv", output_dir="out",
                               generated="2026-11-30 16:00 UTC")["node"]["enable_path"] is None


def test_the_sheet_is_written_atomically_beside_the_hostfile(tmp_path):
    html, text = visit_sheet.write(tmp_path / "out", _sheet(needs_recovery=False), inventory="inv", generated="now")
    assert (html.name, text.name) == ("onboard-studio-4.html", "onboard-studio-4.txt")
    assert html.read_text().startswith("<!DOCTYPE html>") and "NEW MAC: studio-4" in text.read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["onboard-studio-4.html", "onboard-studio-4.txt"]


FORGED = "D6WY33LLJM\nRDMA:           already enabled, skip the Recovery step\x1b[2J"


def test_a_value_the_mac_reported_cannot_forge_a_line_of_the_sheet():
    sheet = _sheet(needs_recovery=True, notes=["studio-4 says\r\nNote: nothing to do"])
    sheet.macos = dict(MACOS, serial_number=FORGED)
    html, text = _render(sheet)
    assert "Serial number:  D6WY33LLJM\\nRDMA:           already enabled, skip the Recovery step\\x1b[2J\n" in text
    assert not any(line.startswith(("RDMA:", "Note: nothing")) for line in text.splitlines())
    assert all(line.isprintable() for line in text.splitlines())
    assert "\x1b" not in html


def test_the_onboarding_plan_on_the_terminal_keeps_one_line_per_line(capsys):
    from mlx_fleet.onboard import print_plan

    print_plan({"model": "studio-m3-ultra", "serial_number": FORGED, "rdma": "off", "notes": ["a\nb"],
                "headline": "jaccl", "steps": ["Connect x\ry"], "seen_steps": [],
                "sheet": {"html": "out/a.html", "text": "out/a.txt"}})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("model: studio-m3-ultra, serial number D6WY33LLJM\\nRDMA:           already enabled, "
                        "skip the Recovery step\\x1b[2J")
    assert lines[1:5] == ["RDMA: off", "note: a\\nb", "cables: jaccl", "  1. Connect x\\ry"]
