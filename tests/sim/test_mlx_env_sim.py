"""playbooks/env.yml (roles/mlx_env) against a fresh 3-node macsim cluster.

One cluster, in order: --check on the fresh cluster changes nothing on the nodes; a converge
with an empty download cache downloads each artifact once for all three nodes; a re-run and
a --check --diff run change nothing; an MLX installed by hand on one node is put back and
nothing else changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from simlib import BIN, REPO

pytestmark = pytest.mark.sim

PLAYBOOK = REPO / "playbooks" / "env.yml"
# A warm cache shared by runs that do not count downloads (the counting run uses its own).
SHARED_CACHE = Path("/var/tmp/mlx-fleet-env-cache")


def play(sim, *args: str, cache: Path) -> dict:
    record = sim.dir / "record.json"
    record.unlink(missing_ok=True)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), MLX_FLEET_RECORD=str(record),
               ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).parent / "callbacks"), ANSIBLE_CALLBACKS_ENABLED="record_json")
    argv = [str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), str(PLAYBOOK),
            "-e", f"mlx_env_cache_dir={cache}", *args]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    elapsed = time.monotonic() - start
    try:
        out = json.loads(record.read_text())
    except (OSError, ValueError):
        raise AssertionError(f"ansible-playbook {args} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    failed = {h: s for h, s in out["stats"].items() if s["failures"] or s["unreachable"]}
    assert proc.returncode == 0 and not failed, (
        f"ansible-playbook {args} exited {proc.returncode}: {failed}\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}")
    out["elapsed"] = elapsed
    return out


def task_results(out: dict, name_part: str) -> dict:
    for play_ in out["plays"]:
        for task in play_["tasks"]:
            if name_part in task["task"]["name"]:
                return task["hosts"]
    raise AssertionError(f"no task {name_part!r}")


def listing(sim) -> dict:
    """What each node has under /opt (its private disk), with sizes and mtimes."""
    found = {}
    for node in sim.nodes:
        root = sim.dir / "nodes" / node / "fs" / "opt"
        found[node] = sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
                             for p in root.rglob("*"))
    return found


def node_ssh(sim, node: str, command: str) -> str:
    proc = subprocess.run(["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes", node, command],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{node}: {command}: {proc.stderr}"
    return proc.stdout


def test_env_converges_once_idempotent_and_repairs_drift(make_sim, tmp_path):
    sim = make_sim(nodes=3)
    report = {}

    # --check on a fresh cluster: nothing changes on the nodes.
    before = listing(sim)
    out = play(sim, "--check", cache=SHARED_CACHE)
    assert listing(sim) == before
    assert all(s["changed"] > 0 for s in out["stats"].values())  # it does say what it would do

    # Fresh converge with an empty cache: every artifact downloaded once, for all nodes.
    fresh_cache = tmp_path / "cache"
    out = play(sim, cache=fresh_cache)
    report["fresh_converge_s"] = round(out["elapsed"], 1)
    plan = next(iter(task_results(out, "download each artifact once").values()))
    log = (fresh_cache / "downloads.log").read_text().split("\n")
    downloaded = [line.split()[1] for line in log if line.strip()]
    assert len(downloaded) == len(set(downloaded)) == plan["downloads"] == plan["artifacts"]
    pushes = [len(plan["hosts"][n]["push"]) for n in sim.nodes]
    # Every node got every artifact (same platform), but each was downloaded once, not three times.
    assert pushes == [plan["artifacts"]] * 3, (pushes, plan["artifacts"])
    report["downloads"] = plan["downloads"]
    facts = task_results(out, "Install the locked set")
    for node in sim.nodes:
        result = facts[node]
        proof = result["proof"]
        assert proof["ok"] and proof["mlx"] == "0.32.4" and proof["machine"] == proof["uname_machine"] == "x86_64"
        assert "cpu" in proof["device"].lower()
        fp = result["ansible_facts"]["mlx_env_fingerprint"]
        assert fp["lock_hash"] == plan["lock_hash"] and fp["installed"]["mlx"] == "0.32.4"
        on_node = json.loads((sim.dir / "nodes" / node / "fs/opt/mlx-fleet/venv.fingerprint.json").read_text())
        assert on_node == fp
        venv = sim.dir / "nodes" / node / "fs/opt/mlx-fleet/venv"
        assert venv.stat().st_uid == (sim.dir / "nodes" / node / "fs/Users/admin").stat().st_uid

    # Re-run: no change anywhere, nothing downloaded or pushed.
    out = play(sim, cache=fresh_cache)
    report["noop_rerun_s"] = round(out["elapsed"], 1)
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: 0 for n in sim.nodes}
    plan = next(iter(task_results(out, "download each artifact once").values()))
    assert plan["downloads"] == 0 and all(not plan["hosts"][n]["push"] for n in sim.nodes)
    report["tasks_per_host_noop"] = {n: s["ok"] + s["skipped"] for n, s in out["stats"].items()}

    # --check --diff on the converged cluster: no change.
    out = play(sim, "--check", "--diff", cache=fresh_cache)
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: 0 for n in sim.nodes}

    # A different MLX installed by hand on one node is put back; nothing else changes.
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.envplan import Cache, best_wheel
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.lock import index_files

    odd = sim.nodes[1]
    old_dir = Path("/var/tmp/mlx-fleet-old-mlx")
    cache = Cache(old_dir)
    cp311 = ["cp311-cp311-manylinux_2_35_x86_64", "py3-none-manylinux_2_35_x86_64", "cp311-cp311-manylinux_2_17_x86_64"]
    paths = [cache.fetch(best_wheel(index_files(n, "0.32.3", None), cp311)) for n in ("mlx", "mlx-cpu")]
    old_dir.chmod(0o755)
    cache.artifacts.chmod(0o755)
    node_ssh(sim, odd, "/opt/mlx-fleet/store/bin/uv pip install --offline --no-index --no-deps --python "
                       f"/opt/mlx-fleet/venv/bin/python {' '.join(str(p) for p in paths)}")
    assert "0.32.3" in node_ssh(sim, odd, "/opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.__version__)'")
    other_before = {n: v for n, v in listing(sim).items() if n != odd}
    out = play(sim, "--diff", cache=fresh_cache)
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: (1 if n == odd else 0) for n in sim.nodes}
    result = task_results(out, "Install the locked set")[odd]
    assert result["changes"] == ["mlx 0.32.3 -> 0.32.4", "mlx-cpu 0.32.3 -> 0.32.4"]
    assert result["actions"] == ["sync"]
    assert result["proof"]["mlx"] == "0.32.4"
    assert {n: v for n, v in listing(sim).items() if n != odd} == other_before
    print("\nmlx_env measurements:", json.dumps(report))
    (Path("/var/tmp") / "mlx-fleet-env-measurements.json").write_text(json.dumps(report))
