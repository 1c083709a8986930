"""The node side of mlx_env: the two paths' checks, the marker rule for what may be cleared,
the Python build's completeness, and the bundle's check on arrival."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env as node
from ansible_collections.mlx_fleet.cluster.plugins.modules import mlx_env


class Failed(Exception):
    pass


class FakeModule:
    def fail_json(self, msg, **kwargs):
        raise Failed(msg)


@pytest.mark.parametrize("path,store,problem", [
    ("venv", "/opt/mlx-fleet/store", "mlx_env_path 'venv' must be an absolute path, like /opt/mlx-fleet/venv"),
    ("/opt/../venv", "/opt/mlx-fleet/store",
     "mlx_env_path '/opt/../venv' must be an absolute path, like /opt/mlx-fleet/venv"),
    ("/", "/opt/mlx-fleet/store", "mlx_env_path '/' is a system or home folder; use a folder of its own, "
                                  "like /opt/mlx-fleet/venv"),
    ("/opt/mlx-fleet/venv", "/usr/local/", "mlx_env_store '/usr/local/' is a system or home folder; use a folder of "
                                           "its own, like /opt/mlx-fleet/store"),
    ("/Users/admin", "/opt/mlx-fleet/store", "mlx_env_path '/Users/admin' is a system or home folder; use a folder "
                                             "of its own, like /opt/mlx-fleet/venv"),
    ("/opt/mlx-fleet", "/opt/mlx-fleet/store", "mlx_env_path '/opt/mlx-fleet' and mlx_env_store "
                                               "'/opt/mlx-fleet/store' overlap; give them separate folders, like "
                                               "/opt/mlx-fleet/venv and /opt/mlx-fleet/store"),
    ("/opt/mlx-fleet/venv", "/opt/mlx-fleet/venv/store", "mlx_env_path '/opt/mlx-fleet/venv' and mlx_env_store "
                                                         "'/opt/mlx-fleet/venv/store' overlap; give them separate "
                                                         "folders, like /opt/mlx-fleet/venv and /opt/mlx-fleet/store"),
])
def test_path_problems_are_one_line_each(path, store, problem):
    assert node.path_problems(path, store) == [problem]


def test_usable_paths():
    assert node.path_problems("/opt/mlx-fleet/venv", "/opt/mlx-fleet/store") == []
    assert node.path_problems("/Users/admin/mlx/venv", "/Users/admin/mlx/store") == []
    assert node.path_problems(os.path.expanduser("~"), "/opt/s") != []  # this machine's own home


def test_only_a_marked_or_empty_folder_is_cleared(tmp_path):
    venv = tmp_path / "venv"
    assert node.folder_state(str(venv), node.VENV_MARKER) == "missing"
    venv.mkdir()
    assert node.folder_state(str(venv), node.VENV_MARKER) == "empty"
    (venv / "precious.txt").write_text("someone's data")
    assert node.folder_state(str(venv), node.VENV_MARKER) == "foreign"
    with pytest.raises(Failed, match="was not made by mlx-fleet"):
        node.claim(FakeModule(), str(venv), node.VENV_MARKER, clear=True)
    assert (venv / "precious.txt").exists()

    (venv / "precious.txt").unlink()
    node.claim(FakeModule(), str(venv), node.VENV_MARKER)
    assert node.folder_state(str(venv), node.VENV_MARKER) == "ours"
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    node.claim(FakeModule(), str(venv), node.VENV_MARKER, clear=True)
    assert sorted(os.listdir(venv)) == [node.VENV_MARKER]


def _admin_folder(tmp_path):
    """The venv's parent as on a Mac where it is not root's: owned by another account (nobody)."""
    parent = tmp_path / "admin"
    parent.mkdir()
    os.chown(parent, 65534, 65534)
    victim = tmp_path / "etc-sudoers"  # any root-owned file on the Mac
    victim.write_text("root ALL=(ALL) ALL\n")
    victim.chmod(0o440)
    return parent, victim


def test_clearing_as_root_writes_nothing_through_a_symlink_the_folders_owner_plants(tmp_path, monkeypatch):
    parent, victim = _admin_folder(tmp_path)
    venv = parent / "venv"
    venv.mkdir()
    (venv / node.VENV_MARKER).write_text("")
    (venv / "lib").mkdir()
    (venv / "lib" / "mlx.py").write_text("")
    (venv / "etc").symlink_to(tmp_path)  # a link inside is removed, what it names is kept
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):  # the admin's process, during the long removal
        real_unlink(path, *args, **kwargs)
        if os.path.basename(path) == node.VENV_MARKER:
            (venv / node.VENV_MARKER).symlink_to(victim)

    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(Failed, match="cannot mark .* appeared while it was being cleared"):
        node.claim(FakeModule(), str(venv), node.VENV_MARKER, clear=True)
    assert victim.read_text() == "root ALL=(ALL) ALL\n" and victim.stat().st_mode & 0o777 == 0o440
    assert sorted(os.listdir(tmp_path)) == ["admin", "etc-sudoers"]
    assert os.listdir(venv) == [node.VENV_MARKER] and (venv / node.VENV_MARKER).is_symlink()


@pytest.mark.parametrize("clear", [True, False])
def test_a_symlinked_venv_or_marker_is_foreign_and_never_written(tmp_path, clear):
    parent, victim = _admin_folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / node.VENV_MARKER).write_text("")
    (elsewhere / "keep").write_text("kept")
    (parent / "venv").symlink_to(elsewhere)
    marked = parent / ".venv.next"
    marked.mkdir()
    (marked / node.VENV_MARKER).symlink_to(victim)
    for folder in (parent / "venv", marked):
        assert node.folder_state(str(folder), node.VENV_MARKER) in ("foreign", "empty")
        with pytest.raises(Failed, match="was not made by mlx-fleet|cannot mark"):
            node.claim(FakeModule(), str(folder), node.VENV_MARKER, clear=clear)
    assert (elsewhere / "keep").read_text() == "kept" and victim.read_text() == "root ALL=(ALL) ALL\n"


def _extracted(store, key="cpython-3.12.16-macos-aarch64-none"):
    root = store / "python" / key / "python"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3.12").write_text("#!python")
    (root / "bin" / "python3.12").chmod(0o755)
    (root / "bin" / "python3").symlink_to("python3.12")
    (root / "lib").mkdir()
    (root / "lib" / "os.py").write_text("import sys")
    marker = {"sha256": "a" * 64, "tree": node.tree_digest(str(store / "python" / key))}
    (store / "python" / f"{key}.json").write_text(json.dumps(marker))
    return root


def test_a_half_extracted_or_altered_build_is_not_intact(tmp_path):
    root = _extracted(tmp_path)
    key = "cpython-3.12.16-macos-aarch64-none"
    assert node.build_state(str(tmp_path), key) == {"sha256": "a" * 64, "intact": True, "prefix": str(root)}
    (root / "lib" / "__pycache__").mkdir()  # Python writes these: not part of the build
    (root / "lib" / "__pycache__" / "os.cpython-312.pyc").write_bytes(b"x")
    assert node.build_state(str(tmp_path), key)["intact"]
    (root / "lib" / "os.py").unlink()
    assert not node.build_state(str(tmp_path), key)["intact"]
    (root / "lib" / "os.py").write_text("import os; os.system('evil')")
    assert not node.build_state(str(tmp_path), key)["intact"]
    (tmp_path / "python" / f"{key}.json").unlink()  # the marker is written last: no marker, unfinished
    assert node.build_state(str(tmp_path), key) is None


def _bundle(tmp_path, members: dict[str, bytes]) -> dict:
    path = tmp_path / "bundle.tar"
    with tarfile.open(path, "w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return {"src": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def test_a_bundle_is_checked_file_by_file_on_arrival(tmp_path):
    good = {"wheels/mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl": b"mlx", "uv/uv-0.13.9.whl": b"uv"}
    expected = {name: _sha(body) for name, body in good.items()}
    staging = tmp_path / "staging"
    staging.mkdir()
    files = mlx_env._unpack(FakeModule(), _bundle(tmp_path, good), expected, str(staging))
    assert {name: open(path, "rb").read() for name, path in files.items()} == good

    # The right name with other bytes (a wheel accepted by its name would pass here).
    bad = dict(good, **{"wheels/mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl": b"evil"})
    with pytest.raises(Failed) as err:
        mlx_env._unpack(FakeModule(), _bundle(tmp_path, bad), expected, str(staging))
    assert str(err.value) == ("mlx_env: wheels/mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl in the bundle does not "
                              f"have its locked sha256 {expected['wheels/mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl']}")
    with pytest.raises(Failed, match="holds wheels/extra.whl, which the plan does not list"):
        mlx_env._unpack(FakeModule(), _bundle(tmp_path, dict(good, **{"wheels/extra.whl": b"x"})), expected,
                        str(staging))
    with pytest.raises(Failed, match="the bundle lacks uv/uv-0.13.9.whl"):
        mlx_env._unpack(FakeModule(), _bundle(tmp_path, {k: v for k, v in good.items() if k.startswith("wheels")}),
                        expected, str(staging))
    changed = dict(_bundle(tmp_path, good), sha256="0" * 64)
    with pytest.raises(Failed, match="arrived with another sha256"):
        mlx_env._unpack(FakeModule(), changed, expected, str(staging))


def test_the_stores_uv_is_used_only_with_its_locked_hash(tmp_path):
    uv = tmp_path / "uv"
    uv.write_bytes(b"#!uv")
    mlx_env._check_uv(FakeModule(), str(uv), _sha(b"#!uv"))
    uv.write_bytes(b"#!evil uv")
    with pytest.raises(Failed, match="is missing or is not the locked uv"):
        mlx_env._check_uv(FakeModule(), str(uv), _sha(b"#!uv"))
    uv.unlink()
    with pytest.raises(Failed, match="is missing or is not the locked uv"):
        mlx_env._check_uv(FakeModule(), str(uv), _sha(b"#!uv"))


class _RecordingModule(FakeModule):
    """FakeModule that can write (files.write_atomically's calls)."""

    def __init__(self):
        self.tmpdir = None

    def atomic_move(self, src, dest, unsafe_writes=False):
        os.replace(src, dest)


def _store_with(tmp_path, wheels: dict[str, bytes], uv: bytes = b"#!uv"):
    layout = node.store_paths(str(tmp_path))
    os.makedirs(layout["wheels"])
    os.makedirs(os.path.dirname(layout["uv"]))
    for name, body in wheels.items():
        (tmp_path / "wheels" / name).write_bytes(body)
    (tmp_path / "bin" / "uv").write_bytes(uv)
    return layout


def _install_run(tmp_path, wheels: dict[str, bytes], checked: dict[str, str] | None = None):
    """An mlx_env run at the point it installs: the plan's wheels and uv, what it checked itself (CHECKED)."""
    run = mlx_env._Run.__new__(mlx_env._Run)
    run.module, run.store, run.layout = _RecordingModule(), str(tmp_path), node.store_paths(str(tmp_path))
    run.plan = {"requirements": [{"filename": n, "sha256": _sha(b)} for n, b in wheels.items()]}
    run.uv, run.checked = {"sha256": _sha(b"#!uv")}, dict(checked or {})
    return run


def test_the_install_records_the_stores_files_it_checked_and_the_read_then_reads_none_of_them(tmp_path, monkeypatch):
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env_state

    wheels = {"mlx-0.32.4-py3-none-any.whl": b"mlx", "numpy-2.4.6-py3-none-any.whl": b"numpy"}
    _store_with(tmp_path, dict(wheels, **{"stray-1.0-py3-none-any.whl": b"stray"}))
    mlx_env._record_store(_install_run(tmp_path, wheels, {"bin/uv": _sha(b"#!uv")}))
    record = json.loads((tmp_path / node.VERIFIED).read_text())
    assert sorted(record) == ["bin/uv", "wheels/mlx-0.32.4-py3-none-any.whl", "wheels/numpy-2.4.6-py3-none-any.whl"]
    stat = os.stat(tmp_path / "wheels" / "mlx-0.32.4-py3-none-any.whl")
    assert record["wheels/mlx-0.32.4-py3-none-any.whl"] == [stat.st_size, stat.st_mtime_ns, _sha(b"mlx")]

    hashed = []
    monkeypatch.setattr(node, "sha256_file", lambda path: hashed.append(os.path.basename(path)) or "hashed")
    store = mlx_env_state.read_store(str(tmp_path))
    assert store["wheels"] == {"mlx-0.32.4-py3-none-any.whl": _sha(b"mlx"), "numpy-2.4.6-py3-none-any.whl": _sha(b"numpy"),
                               "stray-1.0-py3-none-any.whl": "hashed"}
    assert store["uv_sha256"] == _sha(b"#!uv") and hashed == ["stray-1.0-py3-none-any.whl"]


@pytest.mark.parametrize("change", ["same size, new date", "other size, same date"])
def test_a_recorded_file_changed_since_is_hashed_again(tmp_path, change):
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env_state

    wheels = {"mlx-0.32.4-py3-none-any.whl": b"mlx"}
    _store_with(tmp_path, wheels)
    mlx_env._record_store(_install_run(tmp_path, wheels, {"bin/uv": _sha(b"#!uv")}))
    wheel = tmp_path / "wheels" / "mlx-0.32.4-py3-none-any.whl"
    before = os.stat(wheel)
    wheel.write_bytes(b"evl" if change.startswith("same size") else b"evil")
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns + (10**9 if change.startswith("same size") else 0)))
    assert mlx_env_state.read_store(str(tmp_path))["wheels"] == {"mlx-0.32.4-py3-none-any.whl": _sha(wheel.read_bytes())}


def test_the_install_leaves_out_of_its_record_a_file_that_is_not_the_locked_one(tmp_path):
    wheels = {"mlx-0.32.4-py3-none-any.whl": b"mlx"}
    _store_with(tmp_path, {"mlx-0.32.4-py3-none-any.whl": b"evil"}, uv=b"#!evil uv")
    mlx_env._record_store(_install_run(tmp_path, wheels))
    assert json.loads((tmp_path / node.VERIFIED).read_text()) == {}


@pytest.mark.parametrize("text", ["", "[]", '{"wheels/a.whl": [1, 2]}', '{"wheels/a.whl": [true, 2, "x"]}',
                                  '{"wheels/a.whl": "x"}', "[" * 100000],
                         ids=["empty", "a list", "two fields", "a boolean size", "a string", "nested too deep"])
def test_a_record_of_another_shape_is_no_record(tmp_path, text):
    (tmp_path / node.VERIFIED).write_text(text)
    assert node.read_verified(str(tmp_path)) == {}


def test_folders_to_make_leave_an_existing_parent_alone(tmp_path):
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env_state import _to_make

    uid = os.getuid()
    venv, store = tmp_path / "mlx-fleet" / "venv", tmp_path / "mlx-fleet" / "store"
    following = tmp_path / "mlx-fleet" / ".venv.next"
    owned = [{"path": str(f), "owner": "admin", "mode": "0755"} for f in (venv, following, store)]
    assert _to_make(str(venv), str(store), "admin", uid) == [
        {"path": str(tmp_path / "mlx-fleet")}] + owned  # the parent made root-owned, never given the owner
    venv.mkdir(parents=True)
    following.mkdir()
    store.mkdir()
    assert _to_make(str(venv), str(store), "admin", uid) == []
    assert _to_make(str(venv), str(store), "admin", uid + 1) == owned


def test_an_interrupted_runs_leftovers_are_removed(tmp_path):
    layout = node.store_paths(str(tmp_path))
    for folder in (layout["incoming"], layout["pythons"] + "/.partial-abc/python/bin", layout["wheels"]):
        os.makedirs(folder)
    open(os.path.join(layout["incoming"], "half.tar"), "w").close()
    _extracted(tmp_path)
    kept = sorted(os.listdir(layout["pythons"]))
    mlx_env._remove_leftovers(str(tmp_path))
    assert os.listdir(layout["incoming"]) == []
    assert sorted(os.listdir(layout["pythons"])) == [n for n in kept if not n.startswith(".partial-")]
    assert os.path.isdir(layout["wheels"])


def _venv(folder, digest, text):
    folder.mkdir(exist_ok=True)
    (folder / node.VENV_MARKER).write_text("")
    (folder / "bin").mkdir()
    (folder / "bin" / "python").write_text(text)
    (folder / "mlx-fleet.fingerprint.json").write_text(json.dumps({"digest": digest}))


@pytest.mark.parametrize("atomic", [True, False])
def test_the_switch_swaps_in_the_venv_just_built_and_empties_the_old_one(tmp_path, monkeypatch, atomic):
    from ansible_collections.mlx_fleet.cluster.plugins.modules import mlx_env_switch
    from module_runner import Commands, run_module

    venv, beside = tmp_path / "venv", tmp_path / ".venv.next"
    assert node.next_path(str(venv)) == str(beside)
    _venv(venv, "old", "old python")
    _venv(beside, "new", "new python")
    if not atomic:  # a file system without an exchange call: three renames
        monkeypatch.setattr(mlx_env_switch, "exchange", lambda a, b: False)
    built = {"next": str(beside), "path": str(venv), "digest": "new"}
    result = run_module(mlx_env_switch.main, {"path": str(venv), "built": built}, Commands({}))
    assert result["changed"] and result["swapped"] == ("atomic" if atomic else "renames"), result
    assert (venv / "bin" / "python").read_text() == "new python"
    assert sorted(os.listdir(beside)) == [node.VENV_MARKER] and sorted(os.listdir(tmp_path)) == [".venv.next", "venv"]


def test_the_switch_refuses_what_is_not_the_venv_just_built(tmp_path):
    from ansible_collections.mlx_fleet.cluster.plugins.modules import mlx_env_switch
    from module_runner import Commands, run_module

    venv, beside = tmp_path / "venv", tmp_path / ".venv.next"
    _venv(venv, "old", "old python")
    _venv(beside, "half", "half-built python")  # an earlier build, interrupted: its fingerprint is not this one
    args = {"path": str(venv), "built": {"next": str(beside), "path": str(venv), "digest": "new"}}
    result = run_module(mlx_env_switch.main, args, Commands({}))
    assert result["failed"] and "does not hold the environment just built" in result["msg"]
    assert (venv / "bin" / "python").read_text() == "old python"
    (beside / node.VENV_MARKER).unlink()  # not mlx-fleet's
    args["built"]["digest"] = "half"
    assert "is not a folder mlx-fleet made" in run_module(mlx_env_switch.main, args, Commands({}))["msg"]
    assert (venv / "bin" / "python").read_text() == "old python"
    assert run_module(mlx_env_switch.main, {"path": str(venv), "built": None}, Commands({}))["changed"] is False
