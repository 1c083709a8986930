"""The controller's side of mlx_env (mlx_fleet.envplan): tags, per-node plans, the download
cache, the per-node bundles and the CPython mirror (no network)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from packaging import tags as ptags

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import artifacts as envplan
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import PYTHON_BUILD_BASE
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import PROBE, fingerprint

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
DECL = {"python_version": "3.12", "uv_version": "0.13.9", "mlx_version": "0.32.4", "mlx_lm_version": "0.32.2",
        "extra_packages": [], "platforms": ["linux-x86_64", "macos-arm64"]}


def _probe(python=sys.executable, *what):
    out = subprocess.run([python, "-I", "-c", PROBE, *what], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


# ---------------------------------------------------------------- tags from a node's report

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


# ---------------------------------------------------------------- a lock whose bytes exist

def _uv_wheel() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo("uv-0.13.9.data/scripts/uv", date_time=(2026, 1, 1, 0, 0, 0)), b"#!uv")
    return buf.getvalue()


BUILD_NAME = "cpython-3.12.16+20261110-aarch64-apple-darwin-install_only_stripped.tar.gz"
BUILD_URL = f"{PYTHON_BUILD_BASE}/20261110/{quote(BUILD_NAME)}"
BUILD_BODY = b"a python build"


def _artifact(name: str, body: bytes | None = None) -> dict:
    body = name.encode() if body is None else body
    return {"filename": name, "url": f"https://files.example/{name}", "sha256": hashlib.sha256(body).hexdigest(),
            "body": body}


def _lock(python=HERE):
    cp = "cp" + python.replace(".", "")
    pkgs = [
        {"name": "mlx", "version": "0.32.4", "marker": "sys_platform == 'darwin' or sys_platform == 'linux'",
         "files": [_artifact(f"mlx-0.32.4-{cp}-{cp}-manylinux_2_35_x86_64.whl"),
                   _artifact(f"mlx-0.32.4-{cp}-{cp}-macosx_14_0_arm64.whl"),
                   _artifact(f"mlx-0.32.4-{cp}-{cp}-macosx_15_0_arm64.whl")]},
        {"name": "mlx-cpu", "version": "0.32.4", "marker": "sys_platform == 'linux'",
         "files": [_artifact("mlx_cpu-0.32.4-py3-none-manylinux_2_35_x86_64.whl")]},
        {"name": "mlx-metal", "version": "0.32.4", "marker": "sys_platform == 'darwin'",
         "files": [_artifact("mlx_metal-0.32.4-py3-none-macosx_14_0_arm64.whl")]},
        {"name": "fsspec", "version": "2026.9.0", "marker": "", "files": [_artifact("fsspec-2026.9.0-py3-none-any.whl")]},
    ]
    uv = [_artifact("uv-0.13.9-py3-none-macosx_11_0_arm64.whl", _uv_wheel()),
          _artifact("uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", _uv_wheel())]
    build = {"platform": "macos-arm64", "key": "cpython-3.12.16-macos-aarch64-none", "version": "3.12.16",
             "os": "macos", "arch": "aarch64", "libc": "none", "url": BUILD_URL, "filename": BUILD_NAME,
             "sha256": hashlib.sha256(BUILD_BODY).hexdigest()}
    return {"format": 1, "declaration": dict(DECL, python_version=python), "packages": pkgs,
            "uv": {"version": "0.13.9", "files": uv}, "python_builds": [build]}


def _write(lk: dict, tmp_path: Path) -> tuple[Path, dict]:
    """The lock file (without the bodies) and the bodies by URL."""
    bodies = {f["url"]: f.pop("body") for group in [*(p["files"] for p in lk["packages"]), lk["uv"]["files"]]
              for f in group}
    bodies[BUILD_URL] = BUILD_BODY
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(json.dumps(lk))
    return lock_file, bodies


def _linux_facts(**extra):
    facts = {"target": {"path": "/usr/bin/python3", "info": _probe()}, "uname_machine": "x86_64",
             "folders": {"path": "missing", "store": "missing"}, "managed_builds": {},
             "venv": {"exists": False, "info": None}, "wheels": {}, "uv_sha256": "", "fingerprint": None}
    facts.update(extra)
    return facts


def _mac_facts(**extra):
    facts = dict(_linux_facts(), target={"path": "/usr/bin/python3", "info": MAC}, uname_machine="arm64")
    facts.update(extra)
    return facts


def _plan(lk, facts, interpreter="/usr/bin/python3", lock_hash="h" * 64):
    for pkg in lk["packages"] + [lk["uv"]]:
        for f in pkg["files"]:
            f.pop("body", None)
    return envplan.plan_node(lk, lock_hash, facts, interpreter, "/opt/s")


# ---------------------------------------------------------------- per-node plans

def test_plan_linux_node_with_its_own_python():
    plan = _plan(_lock(), _linux_facts())
    cp = "cp" + HERE.replace(".", "")
    assert [r["filename"] for r in plan["requirements"]] == [
        f"mlx-0.32.4-{cp}-{cp}-manylinux_2_35_x86_64.whl", "mlx_cpu-0.32.4-py3-none-manylinux_2_35_x86_64.whl",
        "fsspec-2026.9.0-py3-none-any.whl"]
    assert plan["python_build"] is None and not plan["matches"] and len(plan["push_wheels"]) == 3
    assert plan["changes"] == ["fsspec (none) -> 2026.9.0", "mlx (none) -> 0.32.4", "mlx-cpu (none) -> 0.32.4"]


def test_an_interpreter_of_another_python_than_declared_is_refused():
    with pytest.raises(envplan.PlanError) as err:
        _plan(_lock(python="3.13"), _linux_facts())
    said = str(err.value)  # the interpreter and its version, the variable and the value that fits it
    assert said.startswith("/usr/bin/python3 ") and f"Python {HERE}" in said
    assert said.endswith(f'mlx_env_python_version: "{HERE}"')
    assert err.value.relock  # then resolve the lock again


def test_plan_mac_uv_managed_picks_newest_macos_wheel_and_refuses_unhashed_build():
    lk = _lock(python="3.12")
    lk["python_builds"][0]["sha256"] = None
    with pytest.raises(envplan.PlanError) as err:
        _plan(lk, _mac_facts(), interpreter="")
    assert BUILD_NAME in str(err.value).replace(",", " ").split() and "sha256" in str(err.value).split()
    assert err.value.relock
    plan = _plan(_lock(python="3.12"), _mac_facts(), interpreter="")
    assert plan["interpreter"] == "/opt/s/python/cpython-3.12.16-macos-aarch64-none/python/bin/python3"
    assert [r["filename"] for r in plan["requirements"]] == [
        "mlx-0.32.4-cp312-cp312-macosx_15_0_arm64.whl", "mlx_metal-0.32.4-py3-none-macosx_14_0_arm64.whl",
        "fsspec-2026.9.0-py3-none-any.whl"]
    assert plan["uv_wheel"]["filename"] == "uv-0.13.9-py3-none-macosx_11_0_arm64.whl"
    assert plan["push_build"]["key"] == "cpython-3.12.16-macos-aarch64-none"


def test_a_build_already_extracted_is_pushed_again_only_when_altered():
    build = _lock(python="3.12")["python_builds"][0]
    extracted = {"sha256": build["sha256"], "intact": True, "prefix": "/opt/s/python/x/python"}
    assert _plan(_lock("3.12"), _mac_facts(managed_builds={build["key"]: extracted}), "")["push_build"] is None
    for change in ({"intact": False}, {"sha256": "0" * 64}):
        facts = _mac_facts(managed_builds={build["key"]: dict(extracted, **change)})
        assert _plan(_lock("3.12"), facts, "")["push_build"]["key"] == build["key"]


def test_plan_rejects_rosetta_python():
    facts = _mac_facts(target={"path": "/usr/local/bin/python3", "info": dict(MAC, machine="x86_64")})
    with pytest.raises(envplan.PlanError, match="runs as x86_64 but the node is arm64"):
        _plan(_lock(), facts, "/usr/local/bin/python3")


def test_a_folder_mlx_fleet_did_not_make_is_refused_before_anything_changes():
    with pytest.raises(envplan.PlanError) as err:
        _plan(_lock(), _linux_facts(folders={"path": "foreign", "store": "missing"}))
    assert str(err.value) == ("mlx_env_path exists and was not made by mlx-fleet (it is not empty and has no marker); "
                              "move it away or choose another mlx_env_path")


def test_a_wheel_on_the_node_is_trusted_by_its_hash_not_its_name():
    lk = _lock()
    plan = _plan(lk, _linux_facts())
    right = {r["filename"]: r["sha256"] for r in plan["requirements"]}
    assert _plan(_lock(), _linux_facts(wheels=right))["push_wheels"] == []
    name = next(iter(right))
    tampered = dict(right, **{name: "0" * 64})
    assert [w["filename"] for w in _plan(_lock(), _linux_facts(wheels=tampered))["push_wheels"]] == [name]


def _matching_venv(info, installed, lock_hash="h" * 64, machine="x86_64"):
    venv = {"version": info["version"], "base_prefix": info["prefix"], "machine": machine,
            "installed": installed, "proof": {"ok": True}}
    return {"folders": {"path": "ours", "store": "ours"}, "venv": {"exists": True, "info": venv},
            "fingerprint": fingerprint(lock_hash, installed, ".".join(map(str, info["version"])), machine)}


def test_a_matching_node_gets_nothing_and_versions_compare_as_versions():
    info = _probe()
    installed = {"mlx": "0.32.4", "mlx_cpu": "0.32.4", "fsspec": "2026.09.0"}  # as a venv may report them
    plan = _plan(_lock(), _linux_facts(**_matching_venv(info, installed)))
    assert plan["matches"] and plan["push_wheels"] == [] and plan["uv_wheel"] is None and plan["changes"] == []
    assert plan["fingerprint"]["installed"] == dict(sorted(installed.items()))


@pytest.mark.parametrize("spoil", ["version", "fingerprint", "proof", "marker", "extra"])
def test_a_node_matches_only_with_the_locked_set_a_working_mlx_and_its_fingerprint(spoil):
    info = _probe()
    facts = _linux_facts(**_matching_venv(info, {"mlx": "0.32.4", "mlx-cpu": "0.32.4", "fsspec": "2026.9.0"}))
    vinfo = facts["venv"]["info"]
    if spoil == "version":
        vinfo["installed"]["mlx"] = "0.32.3"
    elif spoil == "fingerprint":
        facts["fingerprint"] = dict(facts["fingerprint"], lock_hash="0" * 64)
    elif spoil == "proof":
        vinfo["proof"] = {"ok": False, "error": "ImportError"}
    elif spoil == "marker":
        facts["folders"]["path"] = "empty"
    else:
        vinfo["installed"]["rich"] = "15.0.0"
    plan = _plan(_lock(), facts)
    assert not plan["matches"] and plan["uv_wheel"] is not None
    if spoil == "version":
        assert plan["changes"] == ["mlx 0.32.3 -> 0.32.4"]
    if spoil == "extra":
        assert plan["changes"] == ["rich 15.0.0 -> (removed)"]


# ---------------------------------------------------------------- one run: download once, bundles

def test_plan_run_downloads_once_for_many_nodes_and_bundles_what_each_lacks(tmp_path):
    lock_file, bodies = _write(_lock(), tmp_path)
    opened = []

    def opener(url):
        opened.append(url)
        return io.BytesIO(bodies[url])

    facts = {f"mini-{i}": _linux_facts() for i in range(1, 5)}
    decl = dict(DECL, python_version=HERE)
    result = envplan.plan_run(str(lock_file), decl, "/usr/bin/python3", "/opt/s", str(tmp_path / "cache"), facts, opener)
    n = len(result["hosts"]["mini-1"]["requirements"]) + 1  # + uv
    assert result["downloads"] == result["artifacts"] == n == len(opened) == len(set(opened))
    bundles = {h["bundle"]["src"] for h in result["hosts"].values()}
    assert len(bundles) == 1, "Macs lacking the same artifacts share one bundle"
    host = result["hosts"]["mini-1"]
    with tarfile.open(host["bundle"]["src"]) as tar:
        members = {m.name: hashlib.sha256(tar.extractfile(m).read()).hexdigest() for m in tar}
    assert sorted(members) == sorted(host["push"]) and len(members) == n
    assert {f"wheels/{r['filename']}": r["sha256"] for r in host["requirements"]}.items() <= members.items()
    assert host["bundle"]["sha256"] == hashlib.sha256(Path(host["bundle"]["src"]).read_bytes()).hexdigest()
    assert host["uv"] == {"sha256": hashlib.sha256(b"#!uv").hexdigest(),
                          "wheel": {"filename": "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                                    "sha256": hashlib.sha256(_uv_wheel()).hexdigest()}}

    # Warm cache, one node already matching, one with everything but uv: nothing downloaded,
    # nothing for the first, a bundle of just the wheels for the second.
    reqs = host["requirements"]
    facts["mini-2"].update(_matching_venv(facts["mini-2"]["target"]["info"], {r["name"]: r["version"] for r in reqs},
                                          lock_hash=result["lock_hash"]))
    facts["mini-3"]["uv_sha256"] = host["uv"]["sha256"]
    opened.clear()
    again = envplan.plan_run(str(lock_file), decl, "/usr/bin/python3", "/opt/s", str(tmp_path / "cache"), facts, opener)
    assert again["downloads"] == 0 and not opened and again["cache_hits"] == n
    assert again["hosts"]["mini-2"]["matches"] and again["hosts"]["mini-2"]["bundle"] is None
    assert again["hosts"]["mini-3"]["push"] == [f"wheels/{r['filename']}" for r in reqs]
    assert again["hosts"]["mini-3"]["uv"]["wheel"] is None


def test_a_tampered_cache_file_is_downloaded_again(tmp_path):
    body = b"the real wheel"
    artifact = {"filename": "a.whl", "url": "https://x/a.whl", "sha256": hashlib.sha256(body).hexdigest()}
    cache = envplan.Cache(tmp_path, opener=lambda url: io.BytesIO(body))
    cache.fetch(artifact)
    cache.path("a.whl").write_bytes(b"tampered in the cache")
    assert cache.fetch(artifact).read_bytes() == body
    assert cache.downloaded == ["a.whl", "a.whl"] and cache.hits == []
    assert cache.fetch(artifact).read_bytes() == body and cache.hits == ["a.whl"]


def test_cache_rejects_wrong_bytes(tmp_path):
    cache = envplan.Cache(tmp_path, opener=lambda url: io.BytesIO(b"evil"))
    with pytest.raises(envplan.PlanError, match="has sha256"):
        cache.fetch({"filename": "a.whl", "url": "https://x/a.whl", "sha256": "0" * 64})
    assert not list(cache.artifacts.iterdir())


def test_plan_run_stops_on_declaration_drift(tmp_path):
    lock_file, _ = _write(_lock(), tmp_path)
    with pytest.raises(EnvLockError, match=r"mlx_env_mlx_lm_version='0.33.0' \(lock: '0.32.2'\)$"):
        envplan.plan_run(str(lock_file), dict(DECL, python_version=HERE, mlx_lm_version="0.33.0"), "", "/opt/s",
                         str(tmp_path), {})


# ---------------------------------------------------------------- the CPython build from a mirror

def _mirror(tmp_path: Path, body: bytes) -> str:
    """A folder laid out like the releases: <release>/<file name>."""
    (tmp_path / "mirror" / "20261110").mkdir(parents=True)
    (tmp_path / "mirror" / "20261110" / BUILD_NAME).write_bytes(body)
    return (tmp_path / "mirror").as_uri()


def test_mirror_replaces_the_release_prefix():
    assert envplan.mirrored(BUILD_URL, "file:///srv/pbs/") == f"file:///srv/pbs/20261110/{quote(BUILD_NAME)}"
    assert envplan.mirrored(BUILD_URL, "") == BUILD_URL
    with pytest.raises(envplan.PlanError, match="is not under"):
        envplan.mirrored("https://example.com/x.tar.gz", "file:///srv/pbs")


def test_a_build_from_a_mirror_with_the_locked_hash_is_bundled(tmp_path):
    lock_file, _ = _write(_lock("3.12"), tmp_path)
    result = envplan.plan_run(str(lock_file), dict(DECL), "", "/opt/s", str(tmp_path / "cache"),
                              {"mac": _mac_facts()}, python_mirror=_mirror(tmp_path, BUILD_BODY),
                              opener=_wheels_then_urllib(tmp_path))
    host = result["hosts"]["mac"]
    assert f"python/{BUILD_NAME}" in host["push"]
    assert host["python_build"] == {"key": "cpython-3.12.16-macos-aarch64-none", "filename": BUILD_NAME,
                                    "sha256": hashlib.sha256(BUILD_BODY).hexdigest()}
    assert (tmp_path / "cache" / "artifacts" / BUILD_NAME).read_bytes() == BUILD_BODY


def test_a_build_whose_hash_differs_is_refused_naming_the_file(tmp_path):
    lock_file, _ = _write(_lock("3.12"), tmp_path)
    mirror = _mirror(tmp_path, b"another build")
    with pytest.raises(envplan.PlanError) as err:
        envplan.plan_run(str(lock_file), dict(DECL), "", "/opt/s", str(tmp_path / "cache"), {"mac": _mac_facts()},
                         python_mirror=mirror, opener=_wheels_then_urllib(tmp_path))
    message = str(err.value)
    assert message.split()[:3] == [BUILD_NAME, "from", f"{mirror}/20261110/{quote(BUILD_NAME)}"]
    assert "\n" not in message and not (tmp_path / "cache" / "artifacts" / BUILD_NAME).exists()


def _wheels_then_urllib(tmp_path):
    """Wheels from the fake index, anything else (the file:// mirror) through urllib."""
    import urllib.request

    lk = _lock("3.12")
    bodies = {f["url"]: f["body"] for group in [*(p["files"] for p in lk["packages"]), lk["uv"]["files"]] for f in group}
    return lambda url: io.BytesIO(bodies[url]) if url in bodies else urllib.request.urlopen(url)


def test_a_node_s_uv_with_the_wrong_hash_is_sent_again(tmp_path):
    # One of the checks that guard the rack (it lived in test_guards.py).
    lock_file, bodies = _write(_lock(), tmp_path)
    facts = {"right": _linux_facts(), "wrong": _linux_facts(), "none": _linux_facts()}
    first = envplan.plan_run(str(lock_file), dict(DECL, python_version=HERE), "/usr/bin/python3", "/opt/s",
                             str(tmp_path / "cache"), facts, lambda url: io.BytesIO(bodies[url]))
    want = first["hosts"]["none"]["uv"]["sha256"]
    facts["right"]["uv_sha256"], facts["wrong"]["uv_sha256"] = want, "0" * 64
    again = envplan.plan_run(str(lock_file), dict(DECL, python_version=HERE), "/usr/bin/python3", "/opt/s",
                             str(tmp_path / "cache"), facts, lambda url: io.BytesIO(bodies[url]))
    uv_members = {host: [m for m in h["push"] if m.startswith("uv/")] for host, h in again["hosts"].items()}
    assert uv_members["right"] == [] and again["hosts"]["right"]["uv"]["wheel"] is None
    assert len(uv_members["wrong"]) == 1 and again["hosts"]["wrong"]["uv"]["wheel"] is not None
    assert len(uv_members["none"]) == 1
