"""`mlx-fleet models sync` on 4 simulated Macs in a ring (issue 28): a path entry (random bytes as safetensors
shards, a config.json, a tokenizer.json) and a Hub entry through the sim's Hub stand-in, pinned by `mlx-fleet lock`.
`--check` says what each Mac would receive and changes nothing; the sync leaves every Mac with every file verified
(`models status --deep` exits 0), huggingface_hub resolves the Hub entry offline from a Mac's cache, the Macs'
management interfaces carried one copy (their byte counters), every other copy went over the cables; a second sync
copies nothing; one flipped byte is repaired by copying that file only; a Mac with too little space is refused
before any byte moves. The data is small (about 20 MB) so the run stays short. Reports are read from the run's
own JSON events (ansible-runner's, under OUTPUT_DIR/runs), never from its sentences."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from simlib import MLX_FLEET

pytestmark = pytest.mark.sim

SHARDS = {"model-00001-of-00002.safetensors": 8 << 20, "model-00002-of-00002.safetensors": 6 << 20}
HUB_REPO = "acme/tiny-hub"
FLIPPED = "model-00002-of-00002.safetensors"


def make_model(folder: Path, shards: dict[str, int]) -> int:
    """Random shards, a config and a tokenizer in FOLDER; their bytes in all."""
    folder.mkdir(parents=True)
    for name, size in shards.items():
        (folder / name).write_bytes(os.urandom(size))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (folder / "tokenizer.json").write_text(json.dumps({"vocab": {f"t{i}": i for i in range(2000)}}))
    return sum(p.stat().st_size for p in folder.iterdir())


def run(sim, env: dict, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """`mlx-fleet ARGS -i INVENTORY`: the process, and the results of its run's controller steps by action."""
    before = set((sim.dir / ".mlx-fleet" / "runs").glob("*")) if (sim.dir / ".mlx-fleet" / "runs").is_dir() else set()
    result = subprocess.run([MLX_FLEET, *args, "-i", str(sim.dir / "inventory.yml")], capture_output=True, text=True,
                            timeout=600, env=env)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    runs = sorted(set((sim.dir / ".mlx-fleet" / "runs").glob("*")) - before)
    found: dict[str, dict] = {}
    for path in (runs[-1] / "job_events").glob("*.json") if runs else ():
        event = json.loads(path.read_text())
        if event.get("event") in ("runner_on_ok", "runner_on_failed"):
            data = event["event_data"]
            found.setdefault(data["task_action"], {})[data["host"]] = data["res"]
    return result, found


def management_bytes(sim) -> int:
    """Bytes every Mac's management interface (en0, its veth to the controller's bridge) received so far."""
    state = sim.state()
    total = 0
    for name in state["nodes"]:
        out = subprocess.run(["ip", "-n", f"mfs{state['index']}-{name}", "-j", "-s", "link", "show", "en0"],
                             capture_output=True, text=True, check=True).stdout
        total += json.loads(out)[0]["stats64"]["rx"]["bytes"]
    return total


def still_listening(sim) -> list[str]:
    """The Macs where anything still listens on the sync's port: none once a sync has returned."""
    state = sim.state()
    return [name for name in state["nodes"]
            if subprocess.run(["ip", "netns", "exec", f"mfs{state['index']}-{name}", "ss", "-Hltn", "sport = :47181"],
                              capture_output=True, text=True, check=True).stdout.strip()]


def held(sim, mac: str, name: str) -> Path:
    return sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "models" / name


def hub_cache(sim, mac: str) -> Path:
    return sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "huggingface" / "hub"


def received(found: dict) -> dict[str, list[str]]:
    """Per Mac the files its model_copy received (model/path)."""
    copies = found.get("mlx_fleet.cluster.model_copy", {})
    return {mac: sorted(f"{f['model']}/{f['path']}" for f in res["ansible_facts"]["mlx_fleet_model_copy"]["received"])
            for mac, res in copies.items()
            if res.get("ansible_facts", {}).get("mlx_fleet_model_copy", {}).get("received")}


def test_models_sync_copies_once_over_the_cables_resumes_nothing_twice_repairs_and_refuses(make_sim, tmp_path):
    sim = make_sim(nodes=4, topology="ring")
    macs = sim.nodes
    source = sim.dir / "models-src" / "tiny"
    path_bytes = make_model(source, SHARDS)
    repo = sim.dir / "repos" / HUB_REPO
    hub_bytes = make_model(repo, {"model.safetensors": 4 << 20})
    served = sim.cli("hub", "serve", str(sim.dir / "repos")).stdout
    endpoint = next(line.split("=", 1)[1] for line in served.splitlines() if line.startswith("HF_ENDPOINT="))
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(tmp_path / "controller-hf"),
               HF_HUB_DISABLE_TELEMETRY="1")
    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    cluster_vars = inventory["all"]["children"]["mlx_cluster"]["vars"]
    env_lock = sim.dir / "mlx-env.lock.json"  # the models' lock goes beside it, in this cluster's folder
    shutil.copyfile(cluster_vars["mlx_env_lock_file"], env_lock)
    cluster_vars["mlx_env_lock_file"] = str(env_lock)
    cluster_vars["mlx_fleet_models"] = [
        {"name": "tiny", "path": str(source)}, {"name": "tiny-hub", "repo": HUB_REPO, "revision": "main"}]
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    result, _ = run(sim, env, "hostfile")  # the cables' /30 addresses, in the cluster model
    assert result.returncode == 0, result.stdout + result.stderr
    result, _ = run(sim, env, "lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr

    # --check: what each Mac would receive; nothing is fetched or copied.
    result, found = run(sim, env, "models", "sync", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    (plan,) = [res["plan"] for res in found["mlx_fleet.cluster.models_sync_plan"].values()]
    assert {mac: (p["files"], p["bytes"]) for mac, p in plan["macs"].items() if p["files"]} == {
        mac: (7, path_bytes + hub_bytes) for mac in macs}
    from_controller = [mac for mac, p in plan["macs"].items() for r in p["receive"] if r["sender"] == "controller"]
    assert from_controller == [macs[0]]  # one Mac is fed by the controller, the others along the cables
    assert not held(sim, macs[0], "tiny").exists() and not (tmp_path / "controller-hf").exists()

    counted = management_bytes(sim)
    result, found = run(sim, env, "models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    crossed = management_bytes(sim) - counted
    assert still_listening(sim) == []  # every Mac's listener ended with the run
    total = path_bytes + hub_bytes
    assert total <= crossed < 1.5 * total, crossed  # one copy over the management network, not four
    (report,) = [res["report"] for res in found["mlx_fleet.cluster.models_sync_report"].values()]
    assert report["complete"] and {row["mac"]: row["received"] for row in report["rows"]} == dict.fromkeys(macs, 7)
    senders = {row["mac"]: row["senders"] for row in report["rows"]}
    assert senders[macs[0]] == ["controller"] and all(set(senders[mac]) <= set(macs) for mac in macs[1:]), senders

    result, found = run(sim, env, "models", "status", "--deep")
    assert result.returncode == 0, result.stdout + result.stderr
    (status,) = [res["report"] for res in found["mlx_fleet.cluster.models_status"].values()]
    assert all(row["present"] and row["verified"] for row in status["rows"]) and len(status["rows"]) == 8
    assert sorted(p.name for p in held(sim, macs[2], "tiny").iterdir()) == sorted(p.name for p in source.iterdir())

    # huggingface_hub itself finds the pinned snapshot in a Mac's cache, offline.
    lock = json.loads((sim.dir / ".mlx-models.lock.json").read_text())
    commit = next(m["commit"] for m in lock["models"] if m["name"] == "tiny-hub")
    resolve = ("import sys; from huggingface_hub import snapshot_download; "
               "print(snapshot_download(sys.argv[1], revision=sys.argv[2], local_files_only=True))")
    for revision in ("main", commit):
        found_at = subprocess.run([str(Path(MLX_FLEET).parent / "python"), "-c", resolve, HUB_REPO, revision],
                                  capture_output=True, text=True, check=True,
                                  env=dict(env, HF_HUB_CACHE=str(hub_cache(sim, macs[3])), HF_HUB_OFFLINE="1"))
        assert found_at.stdout.strip().endswith(f"snapshots/{commit}"), found_at.stderr

    # A second sync copies nothing.
    result, found = run(sim, env, "models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert received(found) == {}

    # One flipped byte on one Mac: that file only is copied again.
    weights = held(sim, macs[2], "tiny") / FLIPPED
    data = bytearray(weights.read_bytes())
    data[4321] ^= 0x40
    weights.write_bytes(bytes(data))
    result, found = run(sim, env, "models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert received(found) == {macs[2]: [f"tiny/{FLIPPED}"]}
    assert weights.read_bytes() == (source / FLIPPED).read_bytes()

    # Ctrl-C while the Macs copy: exit 130, every Mac's part ends on its own (nothing listens any more), no file
    # under its final name that fails its hash; the next sync completes the copy.
    more = sim.dir / "models-src" / "more"
    make_model(more, {"model-00001-of-00001.safetensors": 24 << 20})
    cluster_vars["mlx_fleet_models"].append({"name": "more", "path": str(more)})
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    interrupted = subprocess.Popen([MLX_FLEET, "models", "sync", "-i", str(sim.dir / "inventory.yml")], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in interrupted.stderr:
        if "] Copy the Mac's missing files" in line:  # model_copy started on the Macs
            interrupted.send_signal(signal.SIGINT)
            break
    interrupted.stderr.read()
    assert interrupted.wait(timeout=120) == 130
    for _ in range(180):  # the bounds of silence (30 s, 120 s before a first receiver) end a part alone
        if not still_listening(sim):
            break
        time.sleep(1)
    assert still_listening(sim) == []
    result, found = run(sim, env, "models", "status", "--deep")
    (status,) = [res["report"] for res in found["mlx_fleet.cluster.models_status"].values()]
    assert [(row["mac"], row["differing"]) for row in status["rows"] if row["differing"]] == []
    result, found = run(sim, env, "models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(held(sim, mac, "more").joinpath("model-00001-of-00001.safetensors").read_bytes()
               == (more / "model-00001-of-00001.safetensors").read_bytes() for mac in macs)

    # Too little space on one Mac: refused, naming it, before any byte moves anywhere.
    big = sim.dir / "models-src" / "big"
    big_bytes = make_model(big, {"model.safetensors": 12 << 20})
    cluster_vars["mlx_fleet_models"].append({"name": "big", "path": str(big)})
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    small = held(sim, macs[1], "big")
    small.mkdir()
    pid = str(sim.state()["nodes"][macs[1]]["pid"])
    subprocess.run(["nsenter", "-t", pid, "-m", "mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                    "/opt/mlx-fleet/models/big"], check=True)
    result, found = run(sim, env, "models", "sync")
    assert result.returncode == 1, result.stdout + result.stderr
    (refused,) = found["mlx_fleet.cluster.models_sync_plan"].values()
    assert [(e["mac"], e["needed"], e["free"]) for e in refused["short_of_space"]] == [(macs[1], big_bytes, 4 << 20)]
    assert "mlx_fleet.cluster.model_copy" not in found
    assert [mac for mac in macs if held(sim, mac, "big").exists() and any(held(sim, mac, "big").iterdir())] == []
