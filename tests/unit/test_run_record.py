"""`mlx-fleet run`'s record made from the check's own reads (mlx_fleet.run.facts), and the environment probe's
"digests" mode it reads the distributions with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from captures import THUNDERBOLT_OUTPUTS
from conftest import FIXTURE_DIR, load

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import PROBE
from mlx_fleet.run import facts
from mlx_fleet.run.checks import ENVIRONMENT_READ, Check

ENV = "/opt/mlx-fleet/venv"
PROBED = {"executable": f"{ENV}/bin/python", "version": [3, 12, 8], "installed": {"mlx": "0.29.0"},
          "records": {"mlx": {"files_sha256": "ab" * 32, "checked": 0, "modified": [], "missing": [],
                              "modified_count": 0, "missing_count": 0}}}


def reads(**changed) -> dict:
    """One Mac's reads from real captures, as the check's round returns them (name -> (exit status, stdout))."""
    return {name: (rc, out) for name, (rc, out, _) in THUNDERBOLT_OUTPUTS.items()} | {
        "sw_vers": (0, load(FIXTURE_DIR / "sw_vers__sudo-is-man-pmset__1.txt")),
        "sysctl": (0, load(FIXTURE_DIR / "sysctl-unknown-oid__msbg-bench-notes__1.txt")),
        "hardware": (0, load(FIXTURE_DIR / "system_profiler-SPHardwareDataType-json__inventory-go-test-macstudio__2.txt")),
        ENVIRONMENT_READ: (0, json.dumps(PROBED) + "\n")} | changed


def test_the_record_of_a_mac_comes_from_the_checks_reads():
    record, not_recorded = facts.record_from(Check([], ["m1"], {"m1": reads()}, {"m1": "studio-m3-ultra"}, ENV), None)
    mac = record["macs"]["m1"]
    assert not_recorded == []
    assert mac["model"]["identifier"] == "Mac14,14" and mac["memory_bytes"] > 0 and mac["serial_number"]
    assert mac["python"] == {"version": "3.12.8", "executable": f"{ENV}/bin/python"}
    assert mac["packages"] == {"mlx": {"version": "0.29.0", "files_sha256": "ab" * 32}}
    assert record["cluster"]["hostfile"] is None and record["models"] == {}


def test_a_mac_without_a_read_the_record_needs_is_not_recorded_and_no_environment_is_none():
    hardware_missing = reads()
    del hardware_missing["hardware"]
    record, not_recorded = facts.record_from(
        Check([], ["m1", "m2"], {"m1": hardware_missing, "m2": reads(**{ENVIRONMENT_READ: (127, "")})}, {}, ENV), None)
    assert not_recorded == ["m1"] and list(record["macs"]) == ["m2"]
    assert record["macs"]["m2"]["python"] is None and record["macs"]["m2"]["packages"] == {}


def test_probe_digests_gives_verifys_files_sha256_without_reading_the_files(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    info = site / "tiny-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Tiny\nVersion: 1.0\n")
    (info / "RECORD").write_text("tiny.py,sha256=AAAA,10\ntiny-1.0.dist-info/RECORD,,\n")  # tiny.py is missing

    def probe(mode: str) -> dict:
        out = subprocess.run([str(Path(tmp_path / "venv" / "bin" / "python")), "-I", "-c", PROBE, "installed", mode],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)["records"]["tiny"]

    verified, digested = probe("verify"), probe("digests")
    assert verified["missing"] == ["tiny.py"]
    assert digested == {"files_sha256": verified["files_sha256"], "checked": 0, "modified": [], "missing": [],
                        "modified_count": 0, "missing_count": 0}


def test_a_run_with_declared_models_records_through_the_audit_reading_sizes_not_every_byte(tmp_path, monkeypatch):
    from mlx_fleet import audit_cli, runner
    from mlx_fleet.cli import build_parser

    asked = {}

    def run_playbook(playbook, inventories, options, *, extravars, output_dir):
        asked.update(playbook=playbook, **extravars)
        return runner.RunReport(playbook=playbook)

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    args = build_parser().parse_args(["run", "-i", str(tmp_path / "inventory.yml"), "--", "job.py"])
    assert audit_cli.write_record(args, ["job.py"], tmp_path / "record.json")[1] is None  # no Mac read: no record
    assert asked["playbook"] == "audit" and asked["mlx_fleet_models_deep"] is False
