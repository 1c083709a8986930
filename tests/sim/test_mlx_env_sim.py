"""playbooks/env.yml (roles/mlx_env) against fresh macsim clusters.

Three nodes with their own Python, in order: --check on the fresh cluster changes nothing on
the nodes; a converge with an empty download cache downloads each artifact once for all three
nodes and sends each one bundle; a re-run and a --check --diff run change nothing; an MLX
installed by hand on one node, whose stored wheel was also swapped for other bytes of the same
name, is put back from a fresh copy of that wheel, and nothing else changes.

One node with a uv-managed CPython (the default for real Macs) from a file:// mirror laid out
like the python-build-standalone releases: a lock without the build's hash, and a build whose
bytes differ from the lock, are refused before the node changes; the right build installs and
runs MLX; a build damaged on the node is replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from simlib import BIN, REPO, task_results

pytestmark = pytest.mark.sim

PLAYBOOK = REPO / "playbooks" / "env.yml"
# A warm cache shared by runs that do not count downloads (the counting run uses its own).
SHARED_CACHE = Path("/var/tmp/mlx-fleet-env-cache")
VENV = "opt/mlx-fleet/venv"


def play(sim, *args: str, cache: Path, expect_failure: bool = False) -> dict:
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
    if expect_failure:
        assert proc.returncode != 0 and failed, proc.stdout[-4000:]
    else:
        assert proc.returncode == 0 and not failed, (
            f"ansible-playbook {args} exited {proc.returncode}: {failed}\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}")
    out["elapsed"] = elapsed
    return out


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
    # Every node got every artifact (same platform) in one bundle, the same file for all three;
    # each artifact was downloaded once, not three times.
    assert [len(plan["hosts"][n]["push"]) for n in sim.nodes] == [plan["artifacts"]] * 3
    assert len({plan["hosts"][n]["bundle"]["src"] for n in sim.nodes}) == 1
    report["downloads"] = plan["downloads"]
    facts = task_results(out, "install the locked set")
    for node in sim.nodes:
        result = facts[node]
        assert result["actions"][:3] == ["unpack_bundle", "install_uv", "create_venv"]
        proof = result["proof"]
        assert proof["ok"] and proof["mlx"] == "0.32.4" and proof["machine"] == proof["uname_machine"] == "x86_64"
        assert "cpu" in proof["device"].lower()
        fp = result["ansible_facts"]["mlx_env_fingerprint"]
        assert fp["lock_hash"] == plan["lock_hash"] and fp["installed"]["mlx"] == "0.32.4"
        on_node = json.loads((sim.dir / "nodes" / node / "fs" / VENV / "mlx-fleet.fingerprint.json").read_text())
        assert on_node == fp
        venv = sim.dir / "nodes" / node / "fs" / VENV
        assert venv.stat().st_uid == (sim.dir / "nodes" / node / "fs/Users/admin").stat().st_uid
        assert (venv.parent.stat().st_uid, (venv / ".mlx-fleet-venv").exists()) == (0, True)
        assert not list((venv.parent / "store" / "incoming").iterdir())
        assert stored_record(venv.parent / "store") == files_of(venv.parent / "store")

    # Re-run: no change anywhere, nothing downloaded or sent, the nodes only read.
    out = play(sim, cache=fresh_cache)
    report["noop_rerun_s"] = round(out["elapsed"], 1)
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: 0 for n in sim.nodes}
    plan = next(iter(task_results(out, "download each artifact once").values()))
    assert plan["downloads"] == 0 and all(plan["hosts"][n]["matches"] and not plan["hosts"][n]["bundle"]
                                          for n in sim.nodes)
    # Every node matches the plan: its folders, install and switch are not even included.
    assert all(r.get("skipped") for r in task_results(out, "on the Macs the plan found differing").values())

    # --check --diff on the converged cluster: no change.
    out = play(sim, "--check", "--diff", cache=fresh_cache)
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: 0 for n in sim.nodes}

    # A different MLX installed by hand on one node, and its stored mlx wheel swapped for
    # other bytes under the same name: the wheel is sent again (judged by hash, not name)
    # and the locked MLX put back; nothing else changes.
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.artifacts import Cache, best_wheel
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import index_files

    odd = sim.nodes[1]
    old_dir = Path("/var/tmp/mlx-fleet-old-mlx")
    cache = Cache(old_dir)
    cp311 = ["cp311-cp311-manylinux_2_35_x86_64", "py3-none-manylinux_2_35_x86_64", "cp311-cp311-manylinux_2_17_x86_64"]
    paths = [cache.fetch(best_wheel(index_files(n, "0.32.3", None, ["linux-x86_64"], "3.11"), cp311))
             for n in ("mlx", "mlx-cpu")]
    old_dir.chmod(0o755)
    cache.artifacts.chmod(0o755)
    node_ssh(sim, odd, "/opt/mlx-fleet/store/bin/uv pip install --offline --no-index --no-deps --python "
                       f"/opt/mlx-fleet/venv/bin/python {' '.join(str(p) for p in paths)}")
    assert "0.32.3" in node_ssh(sim, odd, "/opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.__version__)'")
    stored = next((sim.dir / "nodes" / odd / "fs/opt/mlx-fleet/store/wheels").glob("mlx-0.32.4-*.whl"))
    shutil.copyfile(paths[0], stored)  # the right name, other bytes
    other_before = {n: v for n, v in listing(sim).items() if n != odd}
    out = play(sim, "--diff", cache=fresh_cache)
    # Two changed tasks on it: the new venv built beside the old one, and the switch to it.
    assert {n: s["changed"] for n, s in out["stats"].items()} == {n: (2 if n == odd else 0) for n in sim.nodes}
    plan = next(iter(task_results(out, "download each artifact once").values()))
    assert plan["hosts"][odd]["push"] == [f"wheels/{stored.name}"]
    result = task_results(out, "install the locked set")[odd]
    assert result["changes"] == ["mlx 0.32.3 -> 0.32.4", "mlx-cpu 0.32.3 -> 0.32.4"]
    assert result["actions"] == ["unpack_bundle", "sync"]
    assert result["proof"]["mlx"] == "0.32.4"
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == next(
        r["sha256"] for r in plan["hosts"][odd]["requirements"] if r["filename"] == stored.name)
    assert {n: v for n, v in listing(sim).items() if n != odd} == other_before
    store = stored.parent.parent
    assert stored_record(store) == files_of(store)  # the swapped wheel recorded again, as sent and checked
    print("\nmlx_env measurements:", json.dumps(report))


def files_of(store: Path) -> dict[str, list]:
    """The store's wheels and uv: path in the store -> [size, modification time in ns, sha256]."""
    return {str(f.relative_to(store)): [f.stat().st_size, f.stat().st_mtime_ns,
                                        hashlib.sha256(f.read_bytes()).hexdigest()]
            for f in [*sorted((store / "wheels").glob("*.whl")), store / "bin" / "uv"]}


def stored_record(store: Path) -> dict[str, list]:
    """The store's record of what mlx_env checked (verified.json)."""
    return json.loads((store / "verified.json").read_text())


# ---------------------------------------------------------------- an interrupted install

def _kill_on_node(sim, node: str, words: tuple[str, ...], playbook: subprocess.Popen) -> str:
    """SIGKILL the first process on NODE (its network namespace: other clusters run the same commands) whose
    command line holds every one of WORDS, while PLAYBOOK runs; its command line."""
    netns = os.readlink(f"/proc/{sim.state()['nodes'][node]['pid']}/ns/net")
    deadline = time.monotonic() + 600
    while playbook.poll() is None and time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                if all(any(w in a for a in argv) for w in words) and os.readlink(f"/proc/{pid}/ns/net") == netns:
                    os.kill(int(pid), 9)
                    return " ".join(argv)
            except OSError:
                continue  # gone meanwhile
        time.sleep(0.02)
    raise AssertionError(f"no {words} on {node} while the play ran")


def test_an_install_killed_midway_leaves_the_old_venv_and_the_next_run_repairs_it(make_sim):
    sim = make_sim(nodes=1)
    node = sim.nodes[0]
    play(sim, cache=SHARED_CACHE)
    venv = sim.dir / "nodes" / node / "fs" / VENV
    # Drift to repair: mlx-lm removed by hand. The old venv still runs MLX, without mlx-lm.
    node_ssh(sim, node, "/opt/mlx-fleet/store/bin/uv pip uninstall --python /opt/mlx-fleet/venv/bin/python mlx-lm")
    fingerprint = (venv / "mlx-fleet.fingerprint.json").read_bytes()
    imports = "/opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.__version__)'"

    # The install of the new venv is killed midway (uv pip sync, building beside the old venv).
    record = sim.dir / "record.json"
    record.unlink(missing_ok=True)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), MLX_FLEET_RECORD=str(record),
               ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).parent / "callbacks"), ANSIBLE_CALLBACKS_ENABLED="record_json")
    with subprocess.Popen([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), str(PLAYBOOK),
                           "-e", f"mlx_env_cache_dir={SHARED_CACHE}"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as playbook:
        killed = _kill_on_node(sim, node, ("pip", "sync", "/opt/mlx-fleet/.venv.next/bin/python"), playbook)
        assert playbook.wait(timeout=600) != 0
    assert "--offline" in killed
    failed = task_results(json.loads(record.read_text()), "install the locked set")[node]
    assert failed["failed"] and "uv pip sync failed" in failed["msg"]
    # The old venv is as it was: it imports MLX, still lacks mlx-lm, keeps its fingerprint; the half-built one
    # is beside it, not in its place.
    assert node_ssh(sim, node, imports).strip() == "0.32.4"
    assert "No module named 'mlx_lm'" in sim.ssh(node, "/opt/mlx-fleet/venv/bin/python -c 'import mlx_lm'",
                                                 check=False, own_config=True).stderr
    assert (venv / "mlx-fleet.fingerprint.json").read_bytes() == fingerprint
    assert (venv.parent / ".venv.next" / "bin" / "python").exists()

    # The next run builds it again and switches; the one after changes nothing.
    out = play(sim, cache=SHARED_CACHE)
    result = task_results(out, "install the locked set")[node]
    assert result["changes"] == ["mlx-lm (none) -> 0.32.2"] and result["actions"] == ["sync"]
    assert task_results(out, "Switch to the new environment")[node]["swapped"] == "atomic"
    assert node_ssh(sim, node, "/opt/mlx-fleet/venv/bin/python -c 'import mlx_lm, mlx.core; print(\"ok\")'") == "ok\n"
    assert os.listdir(venv.parent / ".venv.next") == [".mlx-fleet-venv"]
    out = play(sim, cache=SHARED_CACHE)
    assert out["stats"][node]["changed"] == 0


# ---------------------------------------------------------------- a uv-managed CPython

def _python_build(dest: Path) -> tuple[str, str]:
    """This machine's CPython as an install_only build archive (python/bin, python/lib), which
    the simulated Macs (Linux underneath) can run; (version, archive name)."""
    version = platform.python_version()
    xy = f"{sys.version_info[0]}.{sys.version_info[1]}"
    name = f"cpython-{version}+mlxfleettest-{platform.machine()}-unknown-linux-gnu-install_only.tar.gz"
    root = dest / "build" / "python"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(os.path.realpath(f"/usr/bin/python{xy}"), root / "bin" / f"python{xy}")
    (root / "bin" / "python3").symlink_to(f"python{xy}")
    skip = shutil.ignore_patterns("__pycache__", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip",
                                  "lib2to3", "config-*", "EXTERNALLY-MANAGED")
    shutil.copytree(sysconfig.get_paths(vars={"installed_base": "/usr", "base": "/usr"})["stdlib"],
                    root / "lib" / f"python{xy}", ignore=skip, symlinks=True)
    with tarfile.open(dest / name, "w:gz") as tar:
        tar.add(root, arcname="python")
    return version, name


def test_managed_python_from_a_mirror_verified_by_hash(make_sim, tmp_path):
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import PYTHON_BUILD_BASE
    from mlx_fleet.sim.access import SIM_ENV_LOCK

    sim = make_sim(nodes=1)
    node = sim.nodes[0]
    version, name = _python_build(tmp_path)
    archive = (tmp_path / name).read_bytes()
    mirror = tmp_path / "mirror"
    (mirror / "mlxfleettest").mkdir(parents=True)
    arch = {"x86_64": "x86_64", "aarch64": "aarch64"}[platform.machine()]
    lock = json.loads(SIM_ENV_LOCK.read_text())
    lock["python_builds"] = [{"platform": f"linux-{arch}", "key": f"cpython-{version}-linux-{arch}-gnu",
                              "version": version, "os": "linux", "arch": arch, "libc": "gnu",
                              "url": f"{PYTHON_BUILD_BASE}/mlxfleettest/{quote(name)}", "filename": name,
                              "sha256": None}]
    lock_file = tmp_path / "lock.json"
    cache = tmp_path / "cache"
    (cache / "artifacts").mkdir(parents=True)
    for wheel in (SHARED_CACHE / "artifacts").glob("*.whl"):  # the wheels, if a run already has them
        os.link(wheel, cache / "artifacts" / wheel.name)
    managed = ("-e", "mlx_env_python_interpreter=", "-e", f"mlx_env_lock_file={lock_file}",
               "-e", f"mlx_env_python_mirror={mirror.as_uri()}")

    # A lock without the build's hash: refused on the controller, the Mac untouched.
    before = listing(sim)
    lock_file.write_text(json.dumps(lock))
    out = play(sim, *managed, cache=cache, expect_failure=True)
    assert "the lock has no sha256 for " + name in task_results(out, "download each artifact once")[node]["msg"]
    assert listing(sim) == before

    # The mirror serves other bytes than the lock's hash: refused naming the file, the Mac untouched.
    lock["python_builds"][0]["sha256"] = hashlib.sha256(archive).hexdigest()
    lock_file.write_text(json.dumps(lock))
    (mirror / "mlxfleettest" / name).write_bytes(archive[:-1] + b"\0")
    out = play(sim, *managed, cache=cache, expect_failure=True)
    message = task_results(out, "download each artifact once")[node]["msg"]
    assert message.startswith(f"mlx_env: {name} from {mirror.as_uri()}/mlxfleettest/{quote(name)} has sha256 ")
    assert message.endswith(f"the lock says {lock['python_builds'][0]['sha256']}") and "\n" not in message
    assert listing(sim) == before

    # The right build: sent, checked, extracted; the venv is made from it and runs MLX.
    (mirror / "mlxfleettest" / name).write_bytes(archive)
    out = play(sim, *managed, cache=cache)
    result = task_results(out, "install the locked set")[node]
    assert "extract_python" in result["actions"] and result["proof"]["ok"]
    key = lock["python_builds"][0]["key"]
    store = sim.dir / "nodes" / node / "fs/opt/mlx-fleet/store"
    home = f"/opt/mlx-fleet/store/python/{key}/python/bin"
    assert f"home = {home}" in (sim.dir / "nodes" / node / "fs" / VENV / "pyvenv.cfg").read_text()
    assert json.loads((store / "python" / f"{key}.json").read_text())["sha256"] == lock["python_builds"][0]["sha256"]

    # A build damaged on the node (a file gone, as a half-done extraction leaves it) is replaced.
    next((store / "python" / key / "python" / "lib").glob("python3*/json/decoder.py")).unlink()
    out = play(sim, *managed, cache=cache)
    plan = next(iter(task_results(out, "download each artifact once").values()))
    assert plan["hosts"][node]["push"] == [f"python/{name}"]
    result = task_results(out, "install the locked set")[node]
    assert result["actions"][:2] == ["unpack_bundle", "extract_python"] and result["proof"]["ok"]
    assert out["stats"][node]["changed"] == 1
