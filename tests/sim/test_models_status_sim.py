"""`mlx-fleet models status` against simulated Macs (issue 28): a path entry of a few MB of random bytes
(safetensors-named weights, a config.json, a tokenizer.json) on mline-1 and mline-2 and not on mline-3 -> exit 1
naming mline-3 and every file it lacks; present on every Mac -> 0 with one module run per Mac; one flipped byte
on one Mac is missed by sizes and found by --deep, naming the Mac and the file. A Hub entry pinned by the models'
lock, laid out as huggingface_hub does on each Mac, counts only where its ref names the pinned commit. The line is
the session's (conftest.shared_line), restored for each test. The report
is read from the run's own JSON events (ansible-runner's, under OUTPUT_DIR/runs), never from its sentences."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from simlib import mlx_fleet

pytestmark = pytest.mark.sim

MODEL = {"model-00001-of-00002.safetensors": 3 << 20, "model-00002-of-00002.safetensors": 1 << 20,
         "config.json": None, "tokenizer.json": None}
FLIPPED = "model-00001-of-00002.safetensors"


def make_model(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, size in MODEL.items():
        data = os.urandom(size) if size else json.dumps({"file": name}).encode()
        (folder / name).write_bytes(data)


def on_mac(sim, mac: str) -> Path:
    """Where the path entry lives on MAC (the simulated Mac's own /opt)."""
    return sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "models" / "tiny"


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_out_hub(sim, mac: str, source: Path, ref: str = COMMIT) -> None:
    """The Hub entry org/tiny in MAC's cache as huggingface_hub leaves it: blobs by sha256, relative links, the ref."""
    root = sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "huggingface" / "hub" / "models--org--tiny"
    for path in sorted(source.iterdir()):
        blob = root / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, blob)
        entry = root / "snapshots" / COMMIT / path.name
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(os.path.relpath(blob, entry.parent))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(ref)


def status(sim, *extra: str):
    """(exit status, the models_status task's report, the module runs of model_files_facts per Mac)."""
    result = mlx_fleet("models", "status", "-i", str(sim.dir / "inventory.yml"), *extra, check=False, timeout=300)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    runs = sorted((sim.dir / ".mlx-fleet" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    events = [json.loads(p.read_text()) for p in (runs[-1] / "job_events").glob("*.json")]
    ok = [e["event_data"] for e in events if e.get("event") == "runner_on_ok"]
    (report,) = [e["res"]["report"] for e in ok if e["task_action"] == "mlx_fleet.cluster.models_status"]
    reads = {}
    for e in ok:
        if e["task_action"] == "mlx_fleet.cluster.model_files_facts":
            reads[e["host"]] = reads.get(e["host"], 0) + 1
    return result.returncode, report, reads


def with_path_entry(sim) -> tuple[Path, dict]:
    """The path entry `tiny` (make_model's files) declared in SIM's inventory: (its folder, the inventory)."""
    source = sim.dir / "models-src" / "tiny"
    make_model(source)
    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_models"] = [{"name": "tiny", "path": str(source)}]
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return source, inventory


def test_models_status_names_the_mac_that_lacks_a_model_and_a_flipped_byte(line):
    sim = line
    source, _ = with_path_entry(sim)
    for mac in ("mline-1", "mline-2"):
        shutil.copytree(source, on_mac(sim, mac))

    code, report, reads = status(sim)
    assert (code, report["lacking"], report["complete"]) == (1, ["mline-3"], False)
    rows = {row["mac"]: row for row in report["rows"]}
    assert sorted(rows["mline-3"]["missing"]) == sorted(MODEL)
    assert rows["mline-3"]["bytes_missing"] == sum(p.stat().st_size for p in source.iterdir())
    assert rows["mline-3"]["free_bytes"] > 0
    assert [rows[m]["present"] for m in ("mline-1", "mline-2")] == [True, True]
    assert reads == {"mline-1": 1, "mline-2": 1, "mline-3": 1}  # one call per Mac
    assert (sim.dir / ".mlx-fleet" / "models" / "tiny.json").is_file()  # the path entry's record

    shutil.copytree(source, on_mac(sim, "mline-3"))
    code, report, reads = status(sim)
    assert (code, report["lacking"], report["complete"]) == (0, [], True)
    assert not any(row["verified"] for row in report["rows"])  # sizes only

    weights = on_mac(sim, "mline-2") / FLIPPED
    data = bytearray(weights.read_bytes())
    data[12345] ^= 0x01
    weights.write_bytes(bytes(data))
    code, report, reads = status(sim)
    assert (code, report["lacking"]) == (0, [])  # the size is the same: only the bytes tell
    code, report, reads = status(sim, "--deep")
    assert (code, report["lacking"]) == (1, ["mline-2"])
    rows = {row["mac"]: row for row in report["rows"]}
    assert rows["mline-2"]["differing"] == {FLIPPED: "hash_differs"}
    assert rows["mline-2"]["bytes_missing"] == MODEL[FLIPPED]
    assert [rows[m]["verified"] for m in ("mline-1", "mline-3")] == [True, True]
    assert report["changed_folders"] == {}

    # A change to the controller's folder is named at the next status.
    (source / "config.json").write_text('{"changed": true}')
    code, report, reads = status(sim)
    assert report["changed_folders"] == {"tiny": {"added": [], "removed": [], "changed": ["config.json"]}}


def test_a_hub_entry_counts_only_with_its_ref_on_the_pinned_commit(line):
    """The models' lock pins org/tiny (beside the environment's lock given with -e); mline-1 and mline-2 hold its
    snapshot, mline-3's ref names another commit: exit 1 naming mline-3; its files are all there."""
    sim = line
    source = sim.dir / "models-src" / "tiny"
    make_model(source)
    files = [{"path": p.name, "size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
             for p in sorted(source.iterdir())]
    (sim.dir / ".mlx-models.lock.json").write_text(json.dumps({"format": 1, "models": [
        {"name": "tiny", "source": "hub", "repo": "org/tiny", "repo_type": "model", "revision": "main",
         "commit": COMMIT, "files": files}]}))
    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_models"] = [{"name": "tiny", "repo": "org/tiny"}]
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    for mac in ("mline-1", "mline-2"):
        lay_out_hub(sim, mac, source)
    lay_out_hub(sim, "mline-3", source, ref="f" * 40)

    code, report, reads = status(sim, "--deep", "-e", f"mlx_env_lock_file={sim.dir / '.mlx-env.lock.json'}")
    assert (code, report["lacking"], report["not_pinned"]) == (1, ["mline-3"], [])
    rows = {row["mac"]: row for row in report["rows"]}
    assert (rows["mline-3"]["ref"], rows["mline-3"]["ref_commit"], rows["mline-3"]["missing"]) == ("other", "f" * 40, [])
    assert [(rows[m]["verified"], rows[m]["commit"]) for m in ("mline-1", "mline-2")] == [(True, COMMIT)] * 2
