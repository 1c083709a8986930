"""`mlx-fleet models sync` on 4 simulated Macs in a ring (issue 28; the session's ring, conftest.models_ring): a path entry (random bytes as safetensors
shards, a config.json, a tokenizer.json) and a Hub entry through the sim's Hub stand-in, pinned by `mlx-fleet lock`.
`--check` says what each Mac would receive and changes nothing; the sync leaves every Mac with every file verified
(`models status --deep` exits 0), huggingface_hub resolves the Hub entry offline from a Mac's cache, the Macs'
management interfaces carried one copy (their byte counters), every other copy went over the cables; a second sync
copies nothing; one flipped byte is repaired by copying that file only (the faults: test_models_faults_sim.py). The
data is small (about 20 MB) so the run stays short, unless MLX_FLEET_MODELS_GIB=1 (below). Reports are read from
the run's own JSON events (ansible-runner's, under OUTPUT_DIR/runs), never from its sentences."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from simlib import MLX_FLEET, ModelsCluster, make_model, received, sync_plan, sync_report

pytestmark = pytest.mark.sim

# MLX_FLEET_MODELS_GIB=1: the model of about 1 GiB (4 shards of 256 MiB, a config, a tokenizer), as a path
# entry and as a Hub entry. Not by default: at that size the test's syncs move 8 GiB onto the Macs and hash each
# byte several times (the controller, every receiver, the reads of every Mac): 75 s on this 2-CPU machine at a load
# of 3 (24 s at the default size), over the 60 s a sim test may cost in the suite.
GIB = os.environ.get("MLX_FLEET_MODELS_GIB") == "1"
SHARDS = ({f"model-0000{i}-of-00004.safetensors": 256 << 20 for i in range(1, 5)} if GIB
          else {"model-00001-of-00002.safetensors": 8 << 20, "model-00002-of-00002.safetensors": 6 << 20})
HUB_SHARDS = SHARDS if GIB else {"model.safetensors": 4 << 20}
HUB_REPO = "acme/tiny-hub"
FLIPPED = sorted(SHARDS)[-1]


def test_models_sync_copies_once_over_the_cables_nothing_twice_and_repairs(models_ring):
    cluster, sim = models_ring, models_ring.sim
    macs, env, held = cluster.macs, cluster.env, cluster.held
    source = sim.dir / "models-src" / "tiny"
    path_bytes = make_model(source, SHARDS)
    hub_bytes = make_model(sim.dir / "repos" / HUB_REPO, HUB_SHARDS)
    models = [{"name": "tiny", "path": str(source)}, {"name": "tiny-hub", "repo": HUB_REPO, "revision": "main"}]
    cluster.declare(models)
    result, _ = cluster.run("lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr

    # --check: what each Mac would receive; nothing is fetched or copied.
    result, found = cluster.run("models", "sync", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    plan = sync_plan(found)
    assert {mac: (p["files"], p["bytes"]) for mac, p in plan["macs"].items() if p["files"]} == {
        mac: (len(SHARDS) + len(HUB_SHARDS) + 4, path_bytes + hub_bytes) for mac in macs}
    from_controller = [mac for mac, p in plan["macs"].items() for r in p["receive"] if r["sender"] == "controller"]
    assert from_controller == [macs[0]]  # one Mac is fed by the controller, the others along the cables
    assert not held(macs[0], "tiny").exists() and not Path(env["HF_HUB_CACHE"]).exists()

    counted = cluster.management_bytes()
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    crossed = cluster.management_bytes() - counted
    assert cluster.still_listening() == []  # every Mac's listener ended with the run
    total = path_bytes + hub_bytes
    assert total <= crossed < 1.5 * total, crossed  # one copy over the management network, not four
    report = sync_report(found)
    files = len(SHARDS) + len(HUB_SHARDS) + 4  # each entry's config and tokenizer
    assert report["complete"] and {row["mac"]: row["received"] for row in report["rows"]} == dict.fromkeys(macs, files)
    senders = {row["mac"]: row["senders"] for row in report["rows"]}
    assert senders[macs[0]] == ["controller"] and all(set(senders[mac]) <= set(macs) for mac in macs[1:]), senders

    result, found = cluster.run("models", "status", "--deep")
    assert result.returncode == 0, result.stdout + result.stderr
    (status,) = [res["report"] for res in found["mlx_fleet.cluster.models_status"].values()]
    assert all(row["present"] and row["verified"] for row in status["rows"]) and len(status["rows"]) == 8
    assert sorted(p.name for p in held(macs[2], "tiny").iterdir()) == sorted(p.name for p in source.iterdir())

    # huggingface_hub itself finds the pinned snapshot in a Mac's cache, offline.
    lock = json.loads((sim.dir / ".mlx-models.lock.json").read_text())
    commit = next(m["commit"] for m in lock["models"] if m["name"] == "tiny-hub")
    resolve = ("import sys; from huggingface_hub import snapshot_download; "
               "print(snapshot_download(sys.argv[1], revision=sys.argv[2], local_files_only=True))")
    for revision in ("main", commit):
        found_at = subprocess.run([str(Path(MLX_FLEET).parent / "python"), "-c", resolve, HUB_REPO, revision],
                                  capture_output=True, text=True, check=True,
                                  env=dict(env, HF_HUB_CACHE=str(cluster.hub_cache(macs[3])), HF_HUB_OFFLINE="1"))
        assert found_at.stdout.strip().endswith(f"snapshots/{commit}"), found_at.stderr

    # A second sync copies nothing.
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert received(found) == {}

    # One flipped byte on one Mac: that file only is copied again.
    weights = held(macs[2], "tiny") / FLIPPED
    data = bytearray(weights.read_bytes())
    data[4321] ^= 0x40
    weights.write_bytes(bytes(data))
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert received(found) == {macs[2]: [f"tiny/{FLIPPED}"]}
    assert weights.read_bytes() == (source / FLIPPED).read_bytes()


def hashed(found: dict) -> dict[str, int]:
    """Per Mac the bytes its read before the plan hashed (model_files_facts' hashed_bytes)."""
    return {mac: res["ansible_facts"]["mlx_fleet_model_files"]["hashed_bytes"]
            for mac, res in found["mlx_fleet.cluster.model_files_facts"].items()}


def test_a_sync_with_nothing_to_copy_hashes_no_byte_the_sync_verified_and_deep_hashes_every_byte(make_sim, tmp_path):
    """As git's index: a file the sync verified as it arrived, still of the size and date its record says, is not
    hashed again; one changed in place since (another date, another size) is hashed or refused and repaired; a
    same-size edit that keeps the date is found by --deep only."""
    sim = make_sim(nodes=4, topology="ring")
    cluster = ModelsCluster(sim, tmp_path / "controller-hf")
    macs, held = cluster.macs, cluster.held
    source = sim.dir / "models-src" / "tiny"
    path_bytes = make_model(source, SHARDS)
    hub_bytes = make_model(sim.dir / "repos" / HUB_REPO, HUB_SHARDS)
    cluster.declare([{"name": "tiny", "path": str(source)}, {"name": "tiny-hub", "repo": HUB_REPO, "revision": "main"}])
    result, _ = cluster.run("lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert hashed(found) == dict.fromkeys(macs, 0) and len(received(found)) == 4  # nothing there to hash yet

    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (hashed(found), received(found)) == (dict.fromkeys(macs, 0), {})

    # In place since the sync: one byte flipped at the same size with a later date; a config of another size.
    flipped = held(macs[1], "tiny") / FLIPPED
    verified_at = flipped.stat().st_mtime_ns
    data = bytearray(flipped.read_bytes())
    data[4321] ^= 0x40
    flipped.write_bytes(bytes(data))
    os.utime(flipped, ns=(verified_at + 10**9, verified_at + 10**9))
    (held(macs[2], "tiny") / "config.json").write_text("{}")
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert hashed(found) == dict(dict.fromkeys(macs, 0), **{macs[1]: SHARDS[FLIPPED]})  # a size differs unhashed
    assert received(found) == {macs[1]: [f"tiny/{FLIPPED}"], macs[2]: ["tiny/config.json"]}
    assert flipped.read_bytes() == (source / FLIPPED).read_bytes()

    # The same size and the same date: trusted by the sync, found by --deep, which hashes every byte.
    trusted = held(macs[3], "tiny") / FLIPPED
    verified_at = trusted.stat().st_mtime_ns
    data = bytearray(trusted.read_bytes())
    data[4321] ^= 0x40
    trusted.write_bytes(bytes(data))
    os.utime(trusted, ns=(verified_at, verified_at))
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (hashed(found), received(found)) == (dict.fromkeys(macs, 0), {})
    result, found = cluster.run("models", "sync", "--deep")
    assert result.returncode == 0, result.stdout + result.stderr
    assert hashed(found) == dict.fromkeys(macs, path_bytes + hub_bytes)
    assert received(found) == {macs[3]: [f"tiny/{FLIPPED}"]}
    assert trusted.read_bytes() == (source / FLIPPED).read_bytes()
