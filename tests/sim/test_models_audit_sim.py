"""The declared models in `mlx-fleet audit`, `record`, `models prune` and `verify --model` against simulated Macs (issue
28): a path entry of a few MB on every Mac of a 3-Mac line; one flipped byte in one file on one Mac is missed by the
audit's sizes and named by `audit --deep` (that Mac and that file, a model-file-differs finding, exit 1 as drift is)
and by `models status --deep` (its row's finding); `models sync` then copies that one file only, and a later change to
that file (one the sync wrote) is seen by the audit's dates, without --deep; `record --deep` lists the model with its
source and per-file hashes, verified on every Mac; once the model is no longer declared, `models prune` removes only
the file the sync wrote (--check lists it first). Reports are read from the run's own JSON events and the files the
commands write, never from their sentences (the session's line, conftest.shared_line). The session's converged 4-Mac
ring (conftest.shared_ring): `verify --script --model` refuses one flipped byte before anything starts and, every copy
verified, the task finds the model at MLX_FLEET_MODEL_PATH on every rank."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from simlib import MLX_FLEET, mlx_fleet
from test_models_status_sim import FLIPPED, MODEL, on_mac, with_path_entry

pytestmark = pytest.mark.sim


def results(sim, *args: str) -> tuple[int, dict[str, dict]]:
    """(exit status, the results of the run's tasks by action and host) of `mlx-fleet ARGS -i INVENTORY`."""
    runs = sim.dir / ".mlx-fleet" / "runs"
    before = set(runs.iterdir()) if runs.is_dir() else set()
    result = mlx_fleet(*args, "-i", str(sim.dir / "inventory.yml"), check=False, timeout=600)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    (run,) = set(runs.iterdir()) - before
    found: dict[str, dict] = {}
    for path in (run / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        if event.get("event") in ("runner_on_ok", "runner_on_failed"):
            data = event["event_data"]
            found.setdefault(data["task_action"], {})[data["host"]] = data["res"]
    return result.returncode, found


def model_findings(found: dict) -> list[tuple]:
    """(kind, Macs, fact) of every model finding of the audit's report."""
    (audit,) = found["mlx_fleet.cluster.audit"].values()
    return sorted((f["kind"], tuple(f["macs"]), f["fact"]) for f in audit["report"]["findings"]
                  if f["topic"] == "models")


def test_audit_status_and_record_name_a_flipped_byte_and_sync_repairs_that_file_only(line):
    sim = line
    source, inventory = with_path_entry(sim)
    for mac in sim.nodes:
        shutil.copytree(source, on_mac(sim, mac))

    code, found = results(sim, "audit", "--deep")
    assert code == 1  # never converged: other facts drift, the model does not
    assert model_findings(found) == []
    reads = {host: "mlx_fleet_model_files" in res["ansible_facts"]
             for host, res in found["mlx_fleet.cluster.node_state"].items()}
    assert reads == dict.fromkeys(sim.nodes, True)  # folded into the audit's one read per Mac
    assert "mlx_fleet.cluster.model_files_facts" not in found

    weights = on_mac(sim, "mline-2") / FLIPPED
    data = bytearray(weights.read_bytes())
    data[54321] ^= 0x08
    weights.write_bytes(bytes(data))

    code, found = results(sim, "audit")
    assert model_findings(found) == []  # the same size: only the bytes tell
    code, found = results(sim, "audit", "--deep")
    assert code == 1
    assert model_findings(found) == [("model-file-differs", ("mline-2",), f"model tiny: {FLIPPED}")]
    report = json.loads((sim.dir / ".mlx-fleet" / "audit.json").read_text())
    assert [(f["kind"], f["macs"]) for f in report["findings"] if f["topic"] == "models"] == [
        ("model-file-differs", ["mline-2"])]

    code, found = results(sim, "models", "status", "--deep")
    assert code == 1
    (status,) = [res["report"] for res in found["mlx_fleet.cluster.models_status"].values()]
    assert [(f["kind"], f["hosts"], f["fact"]) for row in status["rows"] for f in row["findings"]] == [
        ("model-file-differs", ["mline-2"], f"model tiny: {FLIPPED}")]

    code, found = results(sim, "models", "sync")
    assert code == 0
    copies = found["mlx_fleet.cluster.model_copy"]
    moved = {mac: [(f["model"], f["path"]) for f in res["ansible_facts"]["mlx_fleet_model_copy"]["received"]]
             for mac, res in copies.items() if res["ansible_facts"]["mlx_fleet_model_copy"]["received"]}
    assert moved == {"mline-2": [("tiny", FLIPPED)]}
    (sync,) = [res["report"] for res in found["mlx_fleet.cluster.models_sync_report"].values()]
    assert {row["mac"]: row["received"] for row in sync["rows"]} == {"mline-1": 0, "mline-2": 1, "mline-3": 0}
    assert sync["bytes"] == MODEL[FLIPPED]
    assert weights.read_bytes() == (source / FLIPPED).read_bytes()

    code, found = results(sim, "audit", "--deep")
    assert model_findings(found) == []

    # Sizes and dates: a byte flipped in the file the sync wrote is seen without hashing (modified after the
    # sync's record of it); the hand-copied file above was not (no date to compare).
    data = bytearray(weights.read_bytes())
    data[54321] ^= 0x08
    weights.write_bytes(bytes(data))
    code, found = results(sim, "audit")
    assert model_findings(found) == [("model-file-differs", ("mline-2",), f"model tiny: {FLIPPED}")]
    data[54321] ^= 0x08
    weights.write_bytes(bytes(data))  # its bytes as pinned again

    # The run record: the model, its source and every file's hash, verified on every Mac; a change to the
    # controller's folder is named by record --diff.
    before, after = sim.dir / "before.json", sim.dir / "after.json"
    code, found = results(sim, "record", "--deep", "--out", str(before))
    assert code == 0
    tiny = json.loads(before.read_text())["models"]["tiny"]
    assert tiny["source"] == {"path": str(source)}
    assert tiny["files"] == {p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                             for p in source.iterdir()}
    assert tiny["macs"] == dict.fromkeys(sim.nodes, "verified")
    (source / "config.json").write_text('{"changed": true}')
    code, found = results(sim, "record", "--out", str(after))
    compared = mlx_fleet("record", "--diff", str(before), str(after), check=False)
    assert compared.returncode == 1
    changed = {line.split(": ", 1)[0] for line in compared.stdout.splitlines()}
    assert {"models.tiny.files.config.json.sha256", "models.tiny.files.config.json.size"} <= changed
    assert {f"models.tiny.macs.{mac}" for mac in sim.nodes} <= changed  # verified -> not present

    # models prune, once no entry declares the model: only what the sync wrote goes (the file it copied to mline-2;
    # the files copied by hand stay); --check lists it and removes nothing.
    inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_models"] = []
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    code, found = results(sim, "models", "prune", "--check")
    assert code == 0
    listed = {mac: res["removed"] for mac, res in found["mlx_fleet.cluster.models_prune"].items()}
    assert listed == {"mline-1": [], "mline-2": [f"/opt/mlx-fleet/models/tiny/{FLIPPED}"], "mline-3": []}
    assert weights.is_file()
    code, found = results(sim, "models", "prune")
    assert code == 0
    assert {mac: res["changed"] for mac, res in found["mlx_fleet.cluster.models_prune"].items()} == {
        "mline-1": False, "mline-2": True, "mline-3": False}
    assert not weights.exists()
    assert sorted(p.name for p in on_mac(sim, "mline-2").iterdir()) == sorted(set(MODEL) - {FLIPPED})
    assert all(sorted(p.name for p in on_mac(sim, mac).iterdir()) == sorted(MODEL) for mac in ("mline-1", "mline-3"))


TASK = """import json, os
folder = os.environ["MLX_FLEET_MODEL_PATH"]
print(json.dumps([os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))]))
"""


def test_verify_model_refuses_a_mac_without_it_verified_and_gives_the_task_its_path(changed_ring, tmp_path):
    """verify --script --model: one flipped byte on one Mac is refused before anything starts (exit 1, that Mac
    named); with every copy verified the task runs on every rank and finds the model at MLX_FLEET_MODEL_PATH."""
    from simlib import node_python
    from simlib import run_tool as run

    sim, names = changed_ring, changed_ring.nodes
    source, _ = with_path_entry(sim)
    for mac in names:
        shutil.copytree(source, on_mac(sim, mac))
    weights = on_mac(sim, names[1]) / FLIPPED
    data = bytearray(weights.read_bytes())
    data[777] ^= 0x01
    weights.write_bytes(bytes(data))
    task = tmp_path / "task.py"
    task.write_text(TASK)
    python, _ = node_python()
    argv = [MLX_FLEET, "verify", "-i", str(sim.dir / "inventory.yml"), "--python", python,
            "--sizes", "1KiB", "--script", str(task), "--repeat", "2", "--model", "tiny"]

    refused = run(argv + ["--out", str(tmp_path / "refused")], 300)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"{names[1]} (model tiny: {FLIPPED}" in line and not [mac for mac in names if mac != names[1] and mac in line]
    assert not (tmp_path / "refused").exists()  # nothing started, no report

    data[777] ^= 0x01
    weights.write_bytes(bytes(data))
    done = run(argv + ["--out", str(tmp_path / "ran")], 600)
    report = json.loads((tmp_path / "ran" / "verify.json").read_text())
    assert report["record"]["options"]["model"] == {"name": "tiny", "path": "/opt/mlx-fleet/models/tiny"}
    assert report["level"] == "reproduces", done.stdout + done.stderr
    sizes = [p.stat().st_size for p in sorted(source.iterdir())]
    outputs = [run_["outputs"] for run_ in report["script"]["runs"]]
    assert outputs and all(out == sizes for each in outputs for out in each.values())
