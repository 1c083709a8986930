"""The mlx_env declaration, lock parsing and the controller's download planning (no network)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging import tags as ptags

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import envplan, lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.lock import LockError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import PROBE  # noqa: E402

DECL = {"python_version": "3.12", "uv_version": "0.13.9", "mlx_version": "0.32.4", "mlx_lm_version": "0.32.2",
        "extra_packages": []}


# ---------------------------------------------------------------- declaration

def test_declaration_normalized_from_role_variable_names():
    raw = {f"mlx_env_{k}": v for k, v in DECL.items()}
    raw["mlx_env_extra_packages"] = ["tqdm==4.70.1", "numpy"]
    assert lock.normalize_declaration(raw)["extra_packages"] == ["numpy", "tqdm==4.70.1"]


@pytest.mark.parametrize("key,value,message", [
    ("python_version", "3", "mlx_env_python_version must be MAJOR.MINOR (e.g. 3.12), not '3'"),
    ("mlx_version", "latest", "mlx_env_mlx_version must be a version like 1.2.3, not 'latest'"),
    ("extra_packages", "numpy", "mlx_env_extra_packages must be a list of requirements, not 'numpy'"),
    ("uv_version", None, "mlx_env_uv_version is not set"),
])
def test_bad_declaration_one_line(key, value, message):
    with pytest.raises(LockError) as err:
        lock.normalize_declaration(dict(DECL, **{key: value}))
    assert str(err.value) == message


def test_requirements_split_mlx_by_platform():
    assert lock.requirements_in(dict(DECL, extra_packages=["rich"])) == [
        "mlx==0.32.4 ; sys_platform == 'darwin'", "mlx[cpu]==0.32.4 ; sys_platform == 'linux'", "mlx-lm==0.32.2", "rich"]


def test_declaration_mismatch_says_run_mlx_fleet_lock():
    with pytest.raises(LockError) as err:
        lock.check_declaration({"declaration": DECL}, dict(DECL, mlx_version="0.33.0"), "mlx-env.lock.json")
    assert str(err.value) == ("the inventory's environment does not match mlx-env.lock.json: "
                              "mlx_env_mlx_version='0.33.0' (lock: '0.32.4'); run mlx-fleet lock")
    assert lock.check_declaration({"declaration": DECL}, dict(DECL, uv_version="0.13.9"))["uv_version"] == "0.13.9"


def test_committed_lock_matches_role_defaults_and_covers_both_platforms():
    data, digest = lock.load_lock(lock.DEFAULT_LOCK)
    assert digest == hashlib.sha256(lock.DEFAULT_LOCK.read_bytes()).hexdigest()
    lock.check_declaration(data, lock.declaration_from(None, {}))
    assert {"3.11", "3.12"} <= set(data["python_versions"])
    names = {p["name"] for p in data["packages"]}
    assert {"mlx", "mlx-cpu", "mlx-metal", "mlx-lm"} <= names
    for pkg in data["packages"]:
        assert pkg["files"] and all(len(f["sha256"]) == 64 and f["url"].startswith("https://") for f in pkg["files"])
    assert {(b["os"], b["arch"]) for b in data["python_builds"]} >= {("macos", "aarch64"), ("linux", "x86_64")}


def test_unreadable_lock():
    with pytest.raises(LockError, match="run mlx-fleet lock"):
        lock.load_lock("/nonexistent/mlx-env.lock.json")


def test_parse_compiled_uv_output():
    text = ("mlx==0.32.4 ; sys_platform == 'darwin' or sys_platform == 'linux' \\\n"
            f"    --hash=sha256:{'a' * 64} \\\n    --hash=sha256:{'b' * 64}\n"
            f"numpy==2.4.6 ; python_full_version < '3.12' \\\n    --hash=sha256:{'c' * 64}\n")
    assert lock.parse_compiled(text) == [
        {"name": "mlx", "version": "0.32.4", "marker": 'sys_platform == "darwin" or sys_platform == "linux"',
         "hashes": ["a" * 64, "b" * 64]},
        {"name": "numpy", "version": "2.4.6", "marker": 'python_full_version < "3.12"', "hashes": ["c" * 64]}]
    with pytest.raises(LockError):
        lock.parse_compiled("mlx>=0.3\n")


def test_index_files_keeps_locked_hashes_and_platforms():
    files = [{"filename": f, "url": f"https://x/{f}", "hashes": {"sha256": h}} for f, h in (
        ("mlx-0.32.4-cp312-cp312-macosx_14_0_arm64.whl", "1" * 64),
        ("mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl", "2" * 64),
        ("mlx-0.32.4-cp312-cp312-win_amd64.whl", "3" * 64),
        ("mlx-0.32.4-cp312-cp312-macosx_14_0_x86_64.whl", "4" * 64),
        ("mlx-0.32.3-cp312-cp312-macosx_14_0_arm64.whl", "5" * 64),
        ("mlx-0.32.4.tar.gz", "6" * 64))]
    got = lock.index_files("mlx", "0.32.4", ["1" * 64, "2" * 64, "3" * 64], fetch=lambda url: {"files": files})
    assert [f["filename"] for f in got] == ["mlx-0.32.4-cp312-cp312-macosx_14_0_arm64.whl",
                                            "mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl"]


# ---------------------------------------------------------------- tags from a node's report

def _probe(python=sys.executable):
    out = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_node_tags_equal_packaging_sys_tags_here():
    # The node reports raw facts; the controller's tags must be exactly what the node's
    # own packaging would compute (this controller stands in for a Linux node).
    # (packaging puts linux_x86_64 first or last depending on its version: compare as sets,
    # and the manylinux order exactly.)
    info = _probe()
    ours, theirs = envplan.node_tags(info), [str(t) for t in ptags.sys_tags()]
    assert set(ours) == set(theirs)
    assert [t for t in ours if "manylinux" in t] == [t for t in theirs if "manylinux" in t]


MAC = {"implementation": "cpython", "version": [3, 9, 6], "machine": "arm64", "sys_platform": "darwin",
       "mac_ver": "26.2", "glibc": "", "gil_disabled": False, "pointer_bits": 64, "prefix": "/usr",
       "markers": {"implementation_name": "cpython", "implementation_version": "3.9.6", "os_name": "posix",
                   "platform_machine": "arm64", "platform_release": "25.2.0", "platform_system": "Darwin",
                   "platform_version": "", "python_full_version": "3.9.6",
                   "platform_python_implementation": "CPython", "python_version": "3.9", "sys_platform": "darwin"}}


def test_mac_tags_for_a_uv_managed_312():
    tags = envplan.node_tags(MAC, (3, 12))
    assert tags[0] == "cp312-cp312-macosx_26_0_arm64"
    assert "cp312-abi3-macosx_11_0_arm64" in tags and "py3-none-any" in tags
    assert not any("x86_64" in t for t in tags)


def _fake_lock():
    def f(name):
        return {"filename": name, "url": f"https://files.example/{name}", "sha256": hashlib.sha256(name.encode()).hexdigest()}
    pkgs = [
        {"name": "mlx", "version": "0.32.4", "marker": "sys_platform == 'darwin' or sys_platform == 'linux'",
         "files": [f("mlx-0.32.4-cp311-cp311-manylinux_2_35_x86_64.whl"), f("mlx-0.32.4-cp312-cp312-macosx_14_0_arm64.whl"),
                   f("mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl"), f("mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl")]},
        {"name": "mlx-cpu", "version": "0.32.4", "marker": "sys_platform == 'linux'",
         "files": [f("mlx_cpu-0.32.4-py3-none-manylinux_2_35_x86_64.whl")]},
        {"name": "mlx-metal", "version": "0.32.4", "marker": "sys_platform == 'darwin'",
         "files": [f("mlx_metal-0.32.4-py3-none-macosx_14_0_arm64.whl")]},
        {"name": "numpy", "version": "2.4.6", "marker": "python_full_version < '3.12'",
         "files": [f("numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")]},
        {"name": "numpy", "version": "2.5.5", "marker": "python_full_version >= '3.12'",
         "files": [f("numpy-2.5.5-cp312-cp312-macosx_14_0_arm64.whl")]},
    ]
    return {"format": 1, "declaration": DECL, "python_versions": ["3.11", "3.12"], "packages": pkgs,
            "uv": {"version": "0.13.9", "files": [f("uv-0.13.9-py3-none-macosx_11_0_arm64.whl"),
                                                  f("uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")]},
            "python_builds": [{"key": "cpython-3.12.16-macos-aarch64-none", "version": "3.12.16", "os": "macos",
                               "arch": "aarch64", "libc": "none", "url": "https://b/x.tar.gz", "filename": "x.tar.gz",
                               "sha256": None}]}


def _linux_facts():
    return {"target": {"path": "/usr/bin/python3", "info": _probe()}, "uname_machine": "x86_64",
            "managed_builds": [], "venv": {"exists": False, "info": None}, "wheels": {}, "uv_sha256": ""}


def test_plan_linux_node_with_its_own_python():
    plan = envplan.plan_node(_fake_lock(), _linux_facts(), "/usr/bin/python3", "/opt/s")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the fake lock pins numpy per Python 3.11/3.12")
    assert [r["filename"] for r in plan["requirements"]] == [
        "mlx-0.32.4-cp311-cp311-manylinux_2_35_x86_64.whl", "mlx_cpu-0.32.4-py3-none-manylinux_2_35_x86_64.whl",
        "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"]
    assert plan["python_build"] is None and not plan["matches"] and len(plan["push_wheels"]) == 3


def test_plan_mac_uv_managed_picks_newest_macos_wheel_and_refuses_unhashed_build():
    facts = {"target": {"path": "/usr/bin/python3", "info": MAC}, "uname_machine": "arm64", "managed_builds": [],
             "venv": {}, "wheels": {}, "uv_sha256": ""}
    with pytest.raises(envplan.PlanError, match="no sha256 for x.tar.gz"):
        envplan.plan_node(_fake_lock(), facts, "", "/opt/s")
    lk = _fake_lock()
    lk["python_builds"][0]["sha256"] = "f" * 64
    plan = envplan.plan_node(lk, facts, "", "/opt/s")
    assert plan["interpreter"] == "/opt/s/python/cpython-3.12.16-macos-aarch64-none/python/bin/python3"
    assert [r["filename"] for r in plan["requirements"]] == [
        "mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl", "mlx_metal-0.32.4-py3-none-macosx_14_0_arm64.whl",
        "numpy-2.5.5-cp312-cp312-macosx_14_0_arm64.whl"]
    assert plan["uv_wheel"]["filename"] == "uv-0.13.9-py3-none-macosx_11_0_arm64.whl"
    assert plan["push_build"]["key"] == "cpython-3.12.16-macos-aarch64-none"


def test_plan_rejects_rosetta_python():
    facts = {"target": {"path": "/usr/local/bin/python3", "info": dict(MAC, machine="x86_64")}, "uname_machine": "arm64"}
    with pytest.raises(envplan.PlanError, match="runs as x86_64 but the node is arm64"):
        envplan.plan_node(_fake_lock(), facts, "/usr/local/bin/python3", "/opt/s")


def test_plan_run_downloads_once_for_many_nodes_and_skips_matching_nodes(tmp_path):
    lk = _fake_lock()
    # Bodies are the file names, so the fake lock's hashes verify.
    for pkg in lk["packages"] + [lk["uv"]]:
        for f in pkg["files"]:
            if f["filename"].startswith("uv-"):
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w") as zf:
                    zf.writestr("uv-0.13.9.data/scripts/uv", b"#!uv")
                f["body"] = buf.getvalue()
            else:
                f["body"] = f["filename"].encode()
            f["sha256"] = hashlib.sha256(f["body"]).hexdigest()
    bodies = {f["url"]: f.pop("body") for pkg in lk["packages"] + [lk["uv"]] for f in pkg["files"]}
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(json.dumps(lk))
    opened = []

    def opener(url):
        opened.append(url)
        return io.BytesIO(bodies[url])

    facts = {f"mini-{i}": _linux_facts() for i in range(1, 5)}
    result = envplan.plan_run(str(lock_file), DECL, "/usr/bin/python3", "/opt/s", str(tmp_path / "cache"), facts, opener)
    n = len(result["hosts"]["mini-1"]["requirements"]) + 1  # + uv
    assert result["downloads"] == result["artifacts"] == n == len(opened) == len(set(opened))
    assert all(len(h["push"]) == n for h in result["hosts"].values())
    assert result["hosts"]["mini-1"]["push"][-1]["dest"] == "/opt/s/bin/uv"

    # Second run, warm cache, one node already matching: nothing downloaded, nothing pushed to it.
    reqs = result["hosts"]["mini-1"]["requirements"]
    facts["mini-2"]["venv"] = {"exists": True, "info": {"version": facts["mini-2"]["target"]["info"]["version"],
                                                        "base_prefix": facts["mini-2"]["target"]["info"]["prefix"],
                                                        "installed": {r["name"]: r["version"] for r in reqs}}}
    opened.clear()
    again = envplan.plan_run(str(lock_file), DECL, "/usr/bin/python3", "/opt/s", str(tmp_path / "cache"), facts, opener)
    assert again["downloads"] == 0 and not opened and again["cache_hits"] == n
    assert again["hosts"]["mini-2"]["matches"] and again["hosts"]["mini-2"]["push"] == []


def test_cache_rejects_wrong_bytes(tmp_path):
    cache = envplan.Cache(tmp_path, opener=lambda url: io.BytesIO(b"evil"))
    with pytest.raises(envplan.PlanError, match="has sha256"):
        cache.fetch({"filename": "a.whl", "url": "https://x/a.whl", "sha256": "0" * 64})
    assert not list(cache.artifacts.iterdir())


def test_plan_run_stops_on_declaration_drift(tmp_path):
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(json.dumps(_fake_lock()))
    with pytest.raises(LockError, match="run mlx-fleet lock$"):
        envplan.plan_run(str(lock_file), dict(DECL, mlx_lm_version="0.33.0"), "", "/opt/s", str(tmp_path), {})
