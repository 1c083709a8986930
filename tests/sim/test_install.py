"""Both installs, as a new user makes them, outside the clone: the wheel (the `mlx-fleet` CLI) and the
collection (`ansible-galaxy collection install`, then plain `ansible-playbook`), built from a copy of the
tree that holds a running sim's keys and other local state, none of which may ship."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from simlib import BIN, REPO, Sim, mlx_fleet

pytestmark = pytest.mark.sim

UV = str(BIN / "uv")
# Local state a working tree accumulates; none of it belongs in an artifact.
FORBIDDEN = (".sim/", ".mlx-fleet/", "build/", "__pycache__", ".pyc", "id_ed25519", "admin_password",
             ".pytest_cache", ".venv/", ".ansible/")


def _run(argv, **kw):
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    assert result.returncode == 0, f"{' '.join(map(str, argv))} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def _clean_env(**extra) -> dict:
    """No clone config leaks in: no ANSIBLE_* from the test run, no venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("install")


@pytest.fixture(scope="module")
def dirty_tree(work):
    """A copy of the tracked tree with a sim up inside it and the usual local clutter."""
    tree = work / "tree"
    files = _run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_symlink() or src.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), tree / name)
            else:
                shutil.copy2(src, tree / name)
    sim_dir = tree / ".sim" / "demo"
    sim_dir.mkdir(parents=True)
    sim_dir.chmod(0o755)
    mlx_fleet("sim", "up", "--dir", str(sim_dir), "--nodes", "2")
    for clutter in ("build/lib/x.py", ".mlx-fleet/hostfile.json", "inventory/example/.mlx-fleet/hostfile.json",
                    "plugins/plugin_utils/__pycache__/fabric.cpython-311.pyc", ".pytest_cache/v",
                    ".ansible/collections/ansible_collections/mlx_fleet/cluster/galaxy.yml"):
        (tree / clutter).parent.mkdir(parents=True, exist_ok=True)
        (tree / clutter).write_text("local state\n")
    yield tree
    mlx_fleet("sim", "down", "--dir", str(sim_dir), check=False)


@pytest.fixture(scope="module")
def wheel(dirty_tree, work):
    out = work / "dist"
    _run([UV, "build", "--wheel", "--out-dir", str(out), str(dirty_tree)])
    (found,) = out.glob("mlx_fleet-*.whl")
    return found


@pytest.fixture(scope="module")
def collection_tarball(dirty_tree, work):
    out = work / "galaxy"
    _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(dirty_tree)])
    (found,) = out.glob("mlx_fleet-cluster-*.tar.gz")
    return found


def _venv(path: Path, *requirements: str) -> Path:
    _run([UV, "venv", "--quiet", "--python", str(BIN / "python"), str(path)])
    _run([UV, "pip", "install", "--quiet", "--python", str(path / "bin" / "python"),
          "-c", str(REPO / "constraints.txt"), *requirements])
    return path / "bin"


def test_artifacts_carry_no_local_state(wheel, collection_tarball):
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
    with tarfile.open(collection_tarball) as tf:
        galaxy_names = tf.getnames()
    for names in (wheel_names, galaxy_names):
        leaked = [n for n in names if any(bad in n + ("/" if not n.endswith("/") else "") for bad in FORBIDDEN)]
        assert leaked == []
    # ... and each carries what it needs to run.
    assert "ansible_collections/mlx_fleet/cluster/playbooks/hostfile.yml" in wheel_names
    assert "ansible_collections/mlx_fleet/cluster/plugins/plugin_utils/judge/fabric.py" in wheel_names
    assert "ansible_collections/mlx_fleet/cluster/plugins/plugin_utils/render/templates/checklist.html.j2" in wheel_names
    assert "mlx_fleet/cli.py" in wheel_names and "mlx_fleet/ansible.cfg" in wheel_names
    assert {"plugins/plugin_utils/judge/fabric.py", "playbooks/site.yml", "requirements.txt",
            "meta/runtime.yml"} <= set(galaxy_names)
    assert not [n for n in galaxy_names if n.startswith(("src/", "tests/", "collections/"))]


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=3)
    yield sim
    sim.down()


def test_wheel_outside_the_clone(wheel, work, cluster):
    bin_dir = _venv(work / "venv-wheel", str(wheel))
    outside = work / "elsewhere"
    outside.mkdir()
    env = _clean_env()
    version = _run([str(bin_dir / "mlx-fleet"), "--version"], cwd=outside, env=env).stdout
    assert version.strip() == "mlx-fleet 0.2.0"
    inventory = str(cluster.dir / "inventory.yml")
    installed = _run([str(bin_dir / "mlx-fleet"), "hostfile", "-i", inventory, "--output-dir", str(work / "out-wheel")],
                     cwd=outside, env=env)
    assert "backend: jaccl" in installed.stdout
    from_clone = mlx_fleet("hostfile", "-i", inventory, "--output-dir", str(work / "out-clone"))
    assert "backend: jaccl" in from_clone.stdout
    wheel_hostfile = json.loads((work / "out-wheel" / "hostfile.json").read_text())
    assert wheel_hostfile == json.loads((work / "out-clone" / "hostfile.json").read_text())
    assert len(wheel_hostfile["hosts"]) == 3
    _run([str(bin_dir / "mlx-fleet"), "checklist", "-i", inventory, "--output-dir", str(work / "out-wheel")],
         cwd=outside, env=env)
    assert (work / "out-wheel" / "recovery-checklist.txt").exists()
    for command in ("lock", "capture", "hostfile", "checklist", "converge"):
        helptext = _run([str(bin_dir / "mlx-fleet"), command, "--help"], cwd=outside, env=env).stdout
        assert "examples:" in helptext and "Exit status" in helptext


def test_collection_with_ansible_core_only(collection_tarball, work, cluster):
    bin_dir = _venv(work / "venv-core", "ansible-core", "-r", str(REPO / "requirements.txt"))
    assert not (work / "venv-core" / "bin" / "mlx-fleet").exists()
    collections = work / "collections"
    # As README.md tells a collection user: the summary callback enabled by name.
    env = _clean_env(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_CALLBACKS_ENABLED="mlx_fleet.cluster.summary")
    _run([str(bin_dir / "ansible-galaxy"), "collection", "install", "--offline", "-p", str(collections),
          str(collection_tarball)], cwd=work, env=env)
    output_dir = work / "out-galaxy"
    # _run: exit 0, so no Mac failed or was unreachable.
    result = _run([str(bin_dir / "ansible-playbook"), "-i", str(cluster.dir / "inventory.yml"),
                   "-e", f"mlx_fleet_output_dir={output_dir}", "mlx_fleet.cluster.hostfile"], cwd=work, env=env)
    assert len(json.loads((output_dir / "hostfile.json").read_text())["hosts"]) == 3
    summary = result.stdout.rsplit("MLX FLEET SUMMARY", 1)[1].splitlines()[1:]
    assert any(line.startswith(f"hostfiles: {output_dir / 'hostfile.json'}") for line in summary), result.stdout
    assert any(line.startswith("backend: jaccl (") for line in summary), result.stdout
