"""The converge knows the declared models (issue 28), on 2 simulated Macs with a path entry and a Hub entry (through
the sim's Hub stand-in) of a few MB: a converge reports each model the Macs lack with the Macs, the bytes and the
sync's command, from the preflight's one read (no model_files_facts run), copies nothing and exits 0; the hostfiles'
envs carry HF_HUB_CACHE and HF_HUB_OFFLINE=1; a converge asked to (mlx_fleet_models_sync=true) copies them; then
huggingface_hub's own resolution, run on every rank over ssh with the hostfile's envs, finds the pinned snapshot
offline; the next converge has nothing to do. Results are read from the run's JSON events, never its sentences."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import BIN, ENV_CACHE, changed_per_host, runner_events

pytestmark = pytest.mark.sim

HUB_REPO = "acme/tiny-hub"


def make_model(folder: Path, weights: int) -> int:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(weights))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return sum(p.stat().st_size for p in folder.iterdir())


def converge(sim, env: dict, *extra: str) -> subprocess.CompletedProcess:
    result = subprocess.run([str(BIN / "mlx-fleet"), "converge", "-i", str(sim.dir / "inventory.yml"),
                             "-e", f"mlx_env_cache_dir={ENV_CACHE}", *extra], capture_output=True, text=True,
                            timeout=900, env=env, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def results(result: subprocess.CompletedProcess, action: str) -> dict[str, dict]:
    """Per host, the result of ACTION's task (ran, not skipped)."""
    return {e["host"]: e["res"] for e in runner_events(result, "runner_on_ok") if e["task_action"] == action}


def test_the_converge_reports_the_models_to_copy_copies_when_asked_and_every_rank_resolves_offline(make_sim,
                                                                                                     tmp_path):
    sim = make_sim(nodes=2, topology="line")
    macs = sim.nodes
    path_bytes = make_model(sim.dir / "models-src" / "tiny", 3 << 20)
    hub_bytes = make_model(sim.dir / "repos" / HUB_REPO, 2 << 20)
    served = sim.cli("hub", "serve", str(sim.dir / "repos")).stdout
    endpoint = next(line.split("=", 1)[1] for line in served.splitlines() if line.startswith("HF_ENDPOINT="))
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}  # the packaged config
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(tmp_path / "controller-hf"), HF_HUB_DISABLE_TELEMETRY="1")
    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    cluster_vars = inventory["all"]["children"]["mlx_cluster"]["vars"]
    shutil.copyfile(cluster_vars["mlx_env_lock_file"], sim.dir / "mlx-env.lock.json")
    cluster_vars["mlx_env_lock_file"] = str(sim.dir / "mlx-env.lock.json")  # the models' lock goes beside it
    cluster_vars["mlx_fleet_models"] = [{"name": "tiny", "path": str(sim.dir / "models-src" / "tiny")},
                                        {"name": "tiny-hub", "repo": HUB_REPO, "revision": "main"}]
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    locked = subprocess.run([str(BIN / "mlx-fleet"), "lock", "--models-only", "-i", str(sim.dir / "inventory.yml")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert locked.returncode == 0, locked.stdout + locked.stderr

    # A converge: the models to copy are a line to act on (exit 0), read by the preflight's one read per Mac.
    result = converge(sim, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    (status,) = results(result, "mlx_fleet.cluster.models_status").values()
    command = f"mlx-fleet models sync -i {sim.dir / 'inventory.yml'}"
    assert status["to_do"] == [
        {"model": "tiny", "macs": macs, "bytes": 2 * path_bytes, "command": f"{command} tiny"},
        {"model": "tiny-hub", "macs": macs, "bytes": 2 * hub_bytes, "command": f"{command} tiny-hub"}]
    assert results(result, "mlx_fleet.cluster.model_files_facts") == {}  # no module run of its own
    assert results(result, "mlx_fleet.cluster.model_copy") == {}
    facts = results(result, "mlx_fleet.cluster.macos_facts")
    assert {mac: [m["present"] for m in res["ansible_facts"]["mlx_fleet_model_files"]["models"]]
            for mac, res in facts.items()} == dict.fromkeys(macs, [False, False])
    hostfile = json.loads((sim.dir / ".mlx-fleet" / "hostfile.json").read_text())
    assert hostfile["envs"][-2:] == ["HF_HUB_CACHE=/opt/mlx-fleet/huggingface/hub", "HF_HUB_OFFLINE=1"]

    # Asked to: the converge copies them, and says each Mac changed.
    result = converge(sim, env, "-e", "mlx_fleet_models_sync=true")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    copies = results(result, "mlx_fleet.cluster.model_copy")
    assert {mac: len(res["ansible_facts"]["mlx_fleet_model_copy"]["received"]) for mac, res in copies.items()} == (
        dict.fromkeys(macs, 4))
    assert all(changed_per_host(result)[mac] >= 1 for mac in macs)

    # Every rank, over ssh with the hostfile's envs and the Mac's own MLX environment, resolves the pinned snapshot
    # offline, as mlx_lm does.
    commit = next(m["commit"] for m in json.loads((sim.dir / ".mlx-models.lock.json").read_text())["models"]
                  if m["name"] == "tiny-hub")
    python = "/opt/mlx-fleet/venv/bin/python"  # the environment the converge built on every Mac (mlx-lm's own)
    resolve = ("import sys; from huggingface_hub import snapshot_download; "
               "print(snapshot_download(sys.argv[1], local_files_only=True))")
    for rank in hostfile["hosts"]:
        found = sim.ssh(rank["ssh"], shlex.join(["env", *hostfile["envs"], python, "-c", resolve, HUB_REPO]),
                        own_config=True)
        assert found.stdout.strip() == f"/opt/mlx-fleet/huggingface/hub/models--acme--tiny-hub/snapshots/{commit}"

    # Nothing left to do: the next converge says nothing about models and copies nothing.
    result = converge(sim, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    (status,) = results(result, "mlx_fleet.cluster.models_status").values()
    assert status["to_do"] == []
    assert changed_per_host(result) == dict.fromkeys(changed_per_host(result), 0)
