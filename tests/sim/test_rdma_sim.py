"""RDMA readiness on simulated Macs: the Recovery checklist names exactly the Macs that need a
person, prints as one page each, and a later run sees them ready after the Recovery step;
a Thunderbolt 4 Mac is never sent to Recovery; rdma_ctl enable over SSH fails as on a Mac."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from factories import expected_text
from simlib import BIN, Sim

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def playbook(inventory: Path, *playbooks: str, extra: list[str] = ()) -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "false"}
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), *extra,
                           *(str(REPO / p) for p in playbooks)],
                          capture_output=True, text=True, env=env, timeout=300, cwd="/", stdin=subprocess.DEVNULL)


def readiness_lines(output: str) -> list[str]:
    """The lines rdma_readiness prints: after its task's header, before its result."""
    lines = output.split("and say where each Mac stands] ", 1)[1].splitlines()[1:]
    return lines[:next(i for i, line in enumerate(lines) if re.match(r"(ok|changed|fatal): \[", line))]


def node_json(sim: Sim, node: str) -> dict:
    return json.loads((sim.dir / "nodes" / node / "fs/usr/local/libexec/macsim/node.json").read_text())


def pdf_pages(html: Path, tmp_path: Path) -> int:
    pdf = tmp_path / "checklist.pdf"
    subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}",
                    f"--print-to-pdf={pdf}", html.as_uri()], capture_output=True, timeout=120, check=True)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)$", info, re.MULTILINE).group(1))


def test_recovery_checklist_then_all_four_ready(make_sim, tmp_path):
    sim = make_sim(nodes=4, topology="mesh", rdma="mini-1,mini-2")  # RDMA off on mini-3 and mini-4
    inventory = sim.dir / "inventory.yml"
    out = sim.dir / ".mlx-fleet"  # the default: in the inventory's folder

    # Over SSH, even with sudo, rdma_ctl refuses exactly as a Mac does.
    for command in ("sudo rdma_ctl enable", "rdma_ctl enable"):
        refused = sim.ssh("mini-3", command, check=False)
        assert (refused.returncode, refused.stderr) == (77, "rdma_ctl: This tool needs to be executed from Recovery OS.\n")

    result = playbook(inventory, "playbooks/checklist.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = readiness_lines(result.stdout)
    assert lines[2:] == [
        "mini-3: needs the Recovery step: rdma_ctl status says disabled on this Mac mini (mini-m4-pro), macOS 26.2 "
        "(25C56); a person at the Mac enables RDMA in macOS Recovery (see the checklist)",
        "mini-4: needs the Recovery step: rdma_ctl status says disabled on this Mac mini (mini-m4-pro), macOS 26.2 "
        "(25C56); a person at the Mac enables RDMA in macOS Recovery (see the checklist)",
        f"checklist for mini-3, mini-4: {out}/recovery-checklist.html (text: {out}/recovery-checklist.txt)",
        "once mini-3 and mini-4 are enabled from Recovery, the cabling supports jaccl (full mesh); until then auto "
        "falls back to ring (no RDMA)",
    ]
    assert all(line.startswith(f"mini-{i}: ready: ") for i, line in zip((1, 2), lines[:2]))

    # Exactly two sheets, with their serial numbers; the text line by line.
    text = (out / "recovery-checklist.txt").read_text()
    stamp = re.search(r"^State read (.+)$", text, re.MULTILINE).group(1)
    nodes = sim.state()["nodes"]
    assert text == expected_text([
        {"host": n, "location": "not given (mlx_fleet_location)", "serial": node_json(sim, n)["serial"],
         "address": nodes[n]["management_ip"]} for n in ("mini-3", "mini-4")], str(inventory), stamp)
    html = out / "recovery-checklist.html"
    assert re.findall(r'class="serial">([^<]*)<', html.read_text()) == [node_json(sim, n)["serial"]
                                                                         for n in ("mini-3", "mini-4")]
    assert pdf_pages(html, tmp_path) == 2

    # jaccl asked for: the run stops, after the checklist, naming the Macs and the checklist.
    blocked = playbook(inventory, "playbooks/checklist.yml", extra=["-e", "mlx_fleet_backend=jaccl"])
    assert blocked.returncode == 2
    assert ("[ERROR]: Task failed: mlx_fleet_backend jaccl needs RDMA on every Mac: mini-3 and mini-4 "
            f"need the Recovery step; the checklist is {html}") in blocked.stdout.splitlines(), blocked.stdout

    # The person does the step at each Mac; the next run sees all four ready.
    for node in ("mini-3", "mini-4"):
        sim.cli("recovery", node, "--", "rdma_ctl", "enable")
        sim.cli("reboot", node)
    after = playbook(inventory, "playbooks/preflight.yml", "playbooks/rdma.yml", "playbooks/thunderbolt.yml")
    assert after.returncode == 0, after.stdout + after.stderr
    lines = readiness_lines(after.stdout)
    assert [line.split(":")[1].strip() for line in lines[:4]] == ["ready"] * 4
    assert lines[0] == "mini-1: ready: RDMA enabled, 3 devices; Thunderbolt 1, Thunderbolt 2 and Thunderbolt 3 PORT_ACTIVE"
    assert lines[4] == "all 4 Macs are ready for RDMA; the cabling supports jaccl (full mesh)"
    ledger = json.loads((out / "rdma-ledger.json").read_text())
    for node in ("mini-3", "mini-4"):
        assert ledger["nodes"][node]["build_version"] == "25C56"
        assert ledger["nodes"][node]["serial_number"] == node_json(sim, node)["serial"]
    assert "No Mac needs the Recovery step." in (out / "recovery-checklist.txt").read_text()
    assert json.loads((out / "hostfile.json").read_text())["backend"] == "jaccl"


def test_thunderbolt_4_mac_gets_no_page(make_sim, tmp_path):
    plan = tmp_path / "plan.yml"
    plan.write_text(yaml.safe_dump({
        "nodes": {"mini-1": {"model": "mini-m4-pro"}, "mini-2": {"model": "mini-m4-pro", "rdma": False},
                  "mini-3": {"model": "mini-m4", "rdma": False}},
        "cables": ["mini-1:1 -- mini-2:1", "mini-1:2 -- mini-3:1", "mini-2:2 -- mini-3:2"]}))
    sim = make_sim(topology=str(plan))
    result = playbook(sim.dir / "inventory.yml", "playbooks/checklist.yml", extra=["-e", f"mlx_fleet_output_dir={tmp_path}"])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = readiness_lines(result.stdout)
    assert ("mini-3: not capable of RDMA: Mac mini (mini-m4) has Thunderbolt 4 ports, and RDMA over Thunderbolt "
            "needs Thunderbolt 5; use the ring backend for it (a Recovery visit cannot help)") in lines
    assert lines[-1] == ("once mini-2 is enabled from Recovery, the cabling still supports only ring (no RDMA); "
                         "mini-3 cannot do RDMA, so ring is the way for it")
    text = (tmp_path / "recovery-checklist.txt").read_text()
    assert re.findall(r"^Mac:\s+(\S+)$", text, re.MULTILINE) == ["mini-2"]
    assert node_json(sim, "mini-3")["serial"] not in text
