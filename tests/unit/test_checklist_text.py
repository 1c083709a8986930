"""The text checklist is built from printable characters only: a newline, carriage return or terminal
escape in an inventory or node value cannot forge a line of the sheet a person follows at the Mac."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import checklist
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import printable
from factories import ReadinessCluster, minis

FORGED = "Serial number:  C02FORGED01"


def test_values_cannot_forge_a_line(tmp_path):
    cluster = minis(2, disabled=("mini-2",)).mesh()
    cluster.macos["mini-2"].update(model_name=f"Mac mini\r{FORGED}", chip="Apple M4 Pro\x1b[2J\x1b[H",
                                   build_version="25C56\u2028[x] 4. Done", serial_number="SERIAL0002\f")
    assessment = cluster.assess(locations={"mini-2": f"rack 1\n{FORGED}"})
    written = checklist.write(tmp_path, assessment, inventory="inv\n.yml", generated="2026-11-29 18:00 UTC",
                              addresses={"mini-2": "10.0.0.12\x07"})
    text = written.text.read_text()
    lines = text.split("\n")
    assert all(line.isprintable() for line in lines), [line for line in lines if not line.isprintable()]
    assert not any(line.startswith(FORGED) for line in lines)
    assert [line for line in lines if line.startswith("Serial number:")] == ["Serial number:  SERIAL0002\\x0c"]
    assert f"Location:       rack 1\\n{FORGED}" in lines
    assert "Model:          Mac mini\\r" + FORGED + ", Apple M4 Pro\\x1b[2J\\x1b[H" in lines
    assert "Network:        10.0.0.12\\x07" in lines
    assert "\x1b" not in written.html.read_text() and "\r" not in written.html.read_text()


def test_printable_keeps_text_and_escapes_controls():
    assert printable({"a": ["Bürö 2 — shelf", "x\ty"], "n": 3}) == {"a": ["Bürö 2 — shelf", "x\\ty"], "n": 3}


# The way each Mac's sheet gives, from its own macOS (checklist.ENABLE_PATHS): Recovery (Apple TN3205) from 26.2;
# no source ties WWDC26's System Settings switch to a version, so later versions and an unread one get Recovery.
@pytest.mark.parametrize("version", ["26.2", "26.3.1", "26.5", "27.0", "27.1", ""])
def test_each_page_gives_the_way_to_enable_rdma_for_the_macs_own_macos(version):
    cluster = minis(2, disabled=("mini-2",)).mesh()
    cluster.macos["mini-2"]["product_version"] = version
    (page,) = checklist.context(cluster.assess(), inventory="inv", output_dir="out", generated="now")["pages"]
    assert (page["host"], page["enable_path"]) == ("mini-2", "recovery")


def test_the_page_of_a_mac_with_an_unknown_rdma_wording_says_what_was_read():
    cluster = ReadinessCluster({"m1": "macbook-pro-m5-max"}, disabled=("m1",))
    cluster.tb["m1"].update(rdma_status="unknown",
                            rdma_unread=[{"command": "rdma_ctl status", "output": "Status: Disabled"}])
    html, text = checklist.render(checklist.context(cluster.assess(), inventory="inv.yml", output_dir="out",
                                                    generated="now"))
    assert ("Now:            ibv_devices lists no rdma_* device (rdma_ctl status:\n"
            "                a wording no real Mac has shown)\n---") in text
    assert "says disabled" not in text and "says <code>disabled</code>" not in html
    assert "<code>ibv_devices</code> lists no <code>rdma_*</code> device" in html
