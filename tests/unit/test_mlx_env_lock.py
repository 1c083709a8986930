"""The mlx_env declaration, making a lock and the committed locks (no network)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare import environment as env_declaration
from mlx_fleet import env_inventory
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import lock_file as env_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import lock_resolve as env_lock_resolve
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import package_index
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from mlx_fleet.sim.access import SIM_ENV_LOCK, environment_vars

REPO = Path(__file__).resolve().parents[2]
DECL = {"python_version": "3.12", "uv_version": "0.13.9", "mlx_version": "0.32.4", "mlx_lm_version": "0.32.2",
        "extra_packages": [], "platforms": ["macos-arm64"]}


# ---------------------------------------------------------------- declaration

def test_declaration_normalized_from_role_variable_names():
    raw = {f"mlx_env_{k}": v for k, v in DECL.items()}
    raw["mlx_env_extra_packages"] = ["tqdm==4.70.1", "numpy"]
    raw["mlx_env_platforms"] = ["macos-arm64", "linux-x86_64", "macos-arm64"]
    decl = env_declaration.normalize_declaration(raw)
    assert decl["extra_packages"] == ["numpy", "tqdm==4.70.1"]
    assert decl["platforms"] == ["linux-x86_64", "macos-arm64"]


@pytest.mark.parametrize("key,value,message", [
    ("python_version", "3", "mlx_env_python_version must be MAJOR.MINOR (e.g. 3.12), not '3'"),
    ("mlx_version", "latest", "mlx_env_mlx_version must be a version like 1.2.3, not 'latest'"),
    ("extra_packages", "numpy", "mlx_env_extra_packages must be a list of requirements, not 'numpy'"),
    ("uv_version", None, "mlx_env_uv_version is not set"),
    ("platforms", ["windows-x86_64"], "mlx_env_platforms must list some of macos-arm64, linux-x86_64, "
                                      "linux-aarch64, not ['windows-x86_64']"),
    ("platforms", [], "mlx_env_platforms must list some of macos-arm64, linux-x86_64, linux-aarch64, not []"),
])
def test_bad_declaration_one_line(key, value, message):
    with pytest.raises(EnvLockError) as err:
        env_declaration.normalize_declaration(dict(DECL, **{key: value}))
    assert str(err.value) == message


def test_requirements_ask_for_mlx_per_declared_platform():
    def parsed(declaration):  # each line as uv reads it: name, extras, version, marker
        return [(r.name, sorted(r.extras), str(r.specifier), str(r.marker) if r.marker else None)
                for r in map(Requirement, env_declaration.requirements_in(declaration))]

    assert parsed(dict(DECL, extra_packages=["rich"])) == [
        ("mlx", [], "==0.32.4", 'sys_platform == "darwin"'), ("mlx-lm", [], "==0.32.2", None),
        ("rich", [], "", None)]
    assert parsed(dict(DECL, platforms=["linux-x86_64", "macos-arm64"])) == [
        ("mlx", [], "==0.32.4", 'sys_platform == "darwin"'), ("mlx", ["cpu"], "==0.32.4", 'sys_platform == "linux"'),
        ("mlx-lm", [], "==0.32.2", None)]


@pytest.mark.parametrize("change,shown", [
    ({"mlx_version": "0.33.0"}, "mlx_env_mlx_version='0.33.0' (lock: '0.32.4')"),
    ({"extra_packages": ["rich==15.0.0"]}, "mlx_env_extra_packages=['rich==15.0.0'] (lock: [])"),
    ({"platforms": ["linux-x86_64"]}, "mlx_env_platforms=['linux-x86_64'] (lock: ['macos-arm64'])"),
])
def test_declaration_mismatch_says_resolve_the_lock_again(change, shown):
    with pytest.raises(EnvLockError) as err:
        env_declaration.check_declaration({"declaration": DECL}, dict(DECL, **change), "mlx-env.lock.json")
    assert str(err.value).endswith(f"mlx-env.lock.json: {shown}")  # the lock, then each value against it
    # The fix names the lock step as the install has it: the CLI's command, or the collection's playbook.
    for cli, command in ((True, "mlx-fleet lock -i inv/mine"), (False, "ansible-playbook -i inv/mine mlx_fleet.cluster.lock")):
        problem = fixes.lock_problem(err.value, "inv/mine", cli=cli)
        assert problem.startswith(f"{err.value}; ") and problem.endswith(f": {command}")
    assert env_declaration.check_declaration({"declaration": DECL}, dict(DECL))["uv_version"] == "0.13.9"


def test_unreadable_lock():
    with pytest.raises(EnvLockError, match="cannot read the lock file /nonexistent/mlx-env.lock.json") as err:
        env_lock.load_lock("/nonexistent/mlx-env.lock.json")
    assert err.value.relock


def _resolved(packages=1):
    build = {"version": "3.12.8", "filename": "cpython-3.12.8.tar.gz", "key": "cpython-3.12.8-macos-aarch64-none"}
    return lambda decl, uv, index: {"format": env_lock.LOCK_FORMAT, "declaration": decl, "python_builds": [build],
                                    "packages": [{"name": f"p{i}", "version": "1", "files": [{"filename": f"p{i}.whl"}]}
                                                 for i in range(packages)]}


def test_a_lock_is_written_only_when_its_text_differs_and_never_in_check_mode(tmp_path):
    path = tmp_path / "inv" / ".mlx-env.lock.json"
    decl = env_declaration.normalize_declaration(DECL)
    checked = env_lock_resolve.update_lock(decl, str(path), "uv", write=False, resolve=_resolved())
    assert checked["changed"] and not path.exists()  # check mode: resolved, nothing written
    first = env_lock_resolve.update_lock(decl, str(path), "uv", resolve=_resolved())
    assert first["changed"] and path.read_text() == env_lock.lock_text(_resolved()(decl, "uv", ""))
    assert env_lock_resolve.update_lock(decl, str(path), "uv", resolve=_resolved())["changed"] is False
    two = env_lock_resolve.update_lock(decl, str(path), "uv", resolve=_resolved(2))
    assert (two["changed"], two["packages"], two["wheels"]) == (True, 2, 2)
    assert (two["builds"], two["lock_file"], two["sha256"]) == (
        ["3.12.8"], str(path), hashlib.sha256(path.read_bytes()).hexdigest())
    line = env_lock_resolve.summary_line(decl, two)
    assert "\n" not in line and all(value in line for value in ("0.13.9", "3.12.8", str(path), two["sha256"][:16]))


def test_without_packaging_the_plugins_import_and_a_plan_stops_with_one_line():
    """packaging comes with ansible-core; were it missing, the action plugins still load and
    the first use of the environment says what is wrong (not an import traceback)."""
    script = (
        "import sys; sys.modules['packaging'] = None\n"
        "from ansible_collections.mlx_fleet.cluster.plugins.action import audit, mlx_env_plan, node_state\n"
        "from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare import environment as env_declaration\n"
        "from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import artifacts as envplan\n"
        "from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import lock_file, lock_resolve, package_index\n"
        "from mlx_fleet import env_inventory\n"
        "try:\n"
        "    envplan.check_declaration({'declaration': {}}, {})\n"
        "except env_declaration.EnvLockError as exc:\n"
        "    print(exc)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.count("\n") == 1 and {"packaging", "ansible-core:"} <= set(run.stdout.split())


# ---------------------------------------------------------------- the committed locks

def _check_hashed(data: dict) -> None:
    for pkg in data["packages"]:
        assert pkg["files"] and all(len(f["sha256"]) == 64 and f["url"].startswith("https://") for f in pkg["files"])
    for build in data["python_builds"]:
        assert len(build["sha256"]) == 64 and build["url"].startswith(env_lock.PYTHON_BUILD_BASE + "/")


def test_example_inventory_lock_is_for_macs_with_a_hashed_python_build():
    raw, lock_file = env_inventory.inventory_environment(str(REPO / "inventory" / "example"))
    assert lock_file == str(REPO / "inventory" / "example" / ".mlx-env.lock.json")
    data, _ = env_lock.load_lock(lock_file)
    decl = env_declaration.check_declaration(data, env_inventory.declaration_from(raw, {}))
    assert decl["platforms"] == ["macos-arm64"] and decl["python_version"] == "3.12"
    _check_hashed(data)
    assert [(b["key"], b["filename"]) for b in data["python_builds"]] == [
        ("cpython-3.12.16-macos-aarch64-none", "cpython-3.12.16+20261110-aarch64-apple-darwin-install_only_stripped.tar.gz")]
    names = {p["name"] for p in data["packages"]}
    assert {"mlx", "mlx-metal", "mlx-lm"} <= names and "mlx-cpu" not in names
    assert all(any("macosx" in f["filename"] or f["filename"].endswith("-any.whl") for f in p["files"])
               for p in data["packages"])


def test_sim_lock_is_what_the_sim_inventory_declares(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"mlx_cluster": {
        "hosts": {"mini-1": {}}, "vars": environment_vars()}}}}))
    raw, lock_file = env_inventory.inventory_environment(str(inventory))
    assert lock_file == str(SIM_ENV_LOCK)
    data, _ = env_lock.load_lock(lock_file)
    decl = env_declaration.check_declaration(data, env_inventory.declaration_from(raw, {}))
    assert decl["platforms"] == ["linux-aarch64", "linux-x86_64"]
    _check_hashed(data)
    assert {"mlx", "mlx-cpu", "mlx-lm"} <= {p["name"] for p in data["packages"]}


def test_inventory_environment_is_one_per_cluster(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"mlx_cluster": {"hosts": {
        "a": {}, "b": {"mlx_env_mlx_version": "0.33.0"}}}}}}))
    (tmp_path / "group_vars" / "mlx_cluster.yml").write_text("mlx_env_python_version: '3.13'\n")
    with pytest.raises(EnvLockError) as err:
        env_inventory.inventory_environment(str(tmp_path))
    said = str(err.value).replace(":", " ").split()  # one line: the variable, then the two hosts
    assert "\n" not in str(err.value) and said[0] == "mlx_env_mlx_version" and {"a", "b"} <= set(said)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"mlx_cluster": {"hosts": {"a": {}}}}}}))
    raw, lock_file = env_inventory.inventory_environment(str(tmp_path))
    assert raw["mlx_env_python_version"] == "3.13" and raw["mlx_env_platforms"] == ["macos-arm64"]
    assert lock_file == f"{tmp_path}/.mlx-env.lock.json"


# ---------------------------------------------------------------- making a lock

def test_parse_compiled_uv_output():
    text = ("mlx==0.32.4 ; sys_platform == 'darwin' or sys_platform == 'linux' \\\n"
            f"    --hash=sha256:{'a' * 64} \\\n    --hash=sha256:{'b' * 64}\n"
            f"numpy==2.4.6 ; python_full_version < '3.12' \\\n    --hash=sha256:{'c' * 64}\n")
    assert env_lock_resolve.parse_compiled(text) == [
        {"name": "mlx", "version": "0.32.4", "marker": 'sys_platform == "darwin" or sys_platform == "linux"',
         "hashes": ["a" * 64, "b" * 64]},
        {"name": "numpy", "version": "2.4.6", "marker": 'python_full_version < "3.12"', "hashes": ["c" * 64]}]


@pytest.mark.parametrize("line", ["mlx>=0.3", "mlx==0.32.4", "mlx==0.32.4 --hash=md5:abc"])
def test_parse_compiled_refuses_unpinned_or_unhashed_lines(line):
    with pytest.raises(EnvLockError, match="unpinned or unhashed line"):
        env_lock_resolve.parse_compiled(line + "\n")


def _index(*files):
    return lambda url: {"files": [{"filename": f, "url": f"https://x/{f}", "hashes": {"sha256": h}} for f, h in files]}


def test_index_files_keeps_locked_hashes_platforms_and_python():
    fetch = _index(
        ("mlx-0.32.4-cp312-cp312-macosx_14_0_arm64.whl", "1" * 64),
        ("mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl", "2" * 64),
        ("mlx-0.32.4-cp312-cp312-win_amd64.whl", "3" * 64),
        ("mlx-0.32.4-cp312-cp312-macosx_14_0_x86_64.whl", "4" * 64),
        ("mlx-0.32.3-cp312-cp312-macosx_14_0_arm64.whl", "5" * 64),
        ("mlx-0.32.4-cp311-cp311-macosx_14_0_arm64.whl", "7" * 64),
        ("mlx-0.32.4.tar.gz", "6" * 64))
    got = package_index.index_files("mlx", "0.32.4", ["1" * 64, "2" * 64, "3" * 64, "7" * 64], ["macos-arm64"], "3.12",
                           fetch=fetch)
    assert [f["filename"] for f in got] == ["mlx-0.32.4-cp312-cp312-macosx_14_0_arm64.whl"]
    both = package_index.index_files("mlx", "0.32.4", ["1" * 64, "2" * 64], ["macos-arm64", "linux-x86_64"], "3.12", fetch=fetch)
    assert len(both) == 2


def test_index_wheel_with_a_hash_uv_did_not_resolve_is_left_out():
    # The right name and platform, other bytes than uv pip compile resolved: never locked.
    fetch = _index(("mlx_metal-0.32.4-py3-none-macosx_14_0_arm64.whl", "e" * 64),
                   ("mlx_metal-0.32.4-py3-none-macosx_15_0_arm64.whl", "1" * 64))
    got = package_index.index_files("mlx-metal", "0.32.4", ["1" * 64], ["macos-arm64"], "3.12", fetch=fetch)
    assert [f["sha256"] for f in got] == ["1" * 64]
    assert package_index.index_files("mlx-metal", "0.32.4", ["f" * 64], ["macos-arm64"], "3.12", fetch=fetch) == []
    with pytest.raises(EnvLockError) as err:
        env_lock_resolve._require_wheels("mlx-metal==0.32.4", [], ["macos-arm64"], "https://pypi.org/simple")
    assert str(err.value).startswith("mlx-metal==0.32.4 ") and {"macos-arm64", "https://pypi.org/simple"} <= set(
        str(err.value).split())


def test_versions_compare_as_versions():
    fetch = _index(("fsspec-2026.9.0-py3-none-any.whl", "1" * 64))
    assert len(package_index.index_files("fsspec", "2026.09.0", None, ["macos-arm64"], "3.12", fetch=fetch)) == 1
    assert package_index.index_files("fsspec", "2026.9.1", None, ["macos-arm64"], "3.12", fetch=fetch) == []


def test_packages_for_other_platforms_are_dropped():
    assert env_lock_resolve.platforms_needing('sys_platform == "win32"', ["macos-arm64"], "3.12") == []
    assert env_lock_resolve.platforms_needing('sys_platform == "linux"', ["linux-x86_64", "macos-arm64"], "3.12") == ["linux-x86_64"]
    assert env_lock_resolve.platforms_needing('python_full_version >= "3.12.4"', ["macos-arm64"], "3.12") == ["macos-arm64"]
    assert env_lock_resolve.platforms_needing('python_full_version < "3.12"', ["macos-arm64"], "3.12") == []
    assert env_lock_resolve.platforms_needing("", ["macos-arm64"], "3.12") == ["macos-arm64"]


# ---------------------------------------------------------------- the CPython builds' hashes

def _build(os_name, arch, libc, patch, sha="a" * 64, variant=None, kind="install_only_stripped", prerelease=""):
    triple = {"darwin": "apple-darwin", "linux": f"unknown-linux-{libc}"}[os_name]
    filename = f"cpython-3.12.{patch}%2B20261110-{arch}-{triple}-{kind}.tar.gz"
    return {"name": "cpython", "arch": {"family": arch, "variant": None}, "os": os_name, "libc": libc, "major": 3,
            "minor": 12, "patch": patch, "prerelease": prerelease, "variant": variant, "build": "20261110",
            "url": f"{env_lock.PYTHON_BUILD_BASE}/20261110/{filename}", "sha256": sha}


def _uv_sdist(metadata: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        body = json.dumps(metadata).encode()
        info = tarfile.TarInfo("uv-0.13.9/crates/uv-python-managed/download-metadata.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _sdist_index(body: bytes, sha: str | None = None):
    return lambda url: {"files": [{"filename": "uv-0.13.9.tar.gz", "url": "https://files/uv-0.13.9.tar.gz",
                                   "hashes": {"sha256": sha or hashlib.sha256(body).hexdigest()}}]}


def test_python_builds_take_their_sha256_from_the_locked_uv_release():
    metadata = {
        "m15": _build("darwin", "aarch64", "none", 15, "1" * 64),
        "m16": _build("darwin", "aarch64", "none", 16, "2" * 64),
        "m16d": _build("darwin", "aarch64", "none", 16, "3" * 64, variant="debug"),
        "m16f": _build("darwin", "aarch64", "none", 16, "4" * 64, kind="full"),
        "l16": _build("linux", "x86_64", "gnu", 16, "5" * 64),
        "l16m": _build("linux", "x86_64", "musl", 16, "6" * 64),
    }
    body = _uv_sdist(metadata)
    got = env_lock_resolve.python_builds(dict(DECL, platforms=["linux-x86_64", "macos-arm64"]),
                             fetch=_sdist_index(body), download=lambda url: body)
    assert got["source"] == {"filename": "uv-0.13.9.tar.gz", "url": "https://files/uv-0.13.9.tar.gz",
                             "sha256": hashlib.sha256(body).hexdigest()}
    assert [(b["platform"], b["key"], b["sha256"]) for b in got["builds"]] == [
        ("linux-x86_64", "cpython-3.12.16-linux-x86_64-gnu", "5" * 64),
        ("macos-arm64", "cpython-3.12.16-macos-aarch64-none", "2" * 64)]
    assert got["builds"][1]["filename"] == "cpython-3.12.16+20261110-aarch64-apple-darwin-install_only_stripped.tar.gz"


def test_python_builds_refuse_a_tampered_uv_release_or_a_build_without_hash():
    body = _uv_sdist({"m16": _build("darwin", "aarch64", "none", 16, None)})
    with pytest.raises(EnvLockError, match="uv-0.13.9.tar.gz from https://files/uv-0.13.9.tar.gz has sha256"):
        env_lock_resolve.python_builds(DECL, fetch=_sdist_index(body, "0" * 64), download=lambda url: body)
    with pytest.raises(EnvLockError, match="gives no sha256"):
        env_lock_resolve.python_builds(DECL, fetch=_sdist_index(body), download=lambda url: body)
    with pytest.raises(EnvLockError, match="knows no CPython 3.11 build for macos-arm64"):
        env_lock_resolve.python_builds(dict(DECL, python_version="3.11"), fetch=_sdist_index(body), download=lambda url: body)


# ---------------------------------------------------------------- fetching (a server on this machine)

def test_fetches_send_only_their_headers_and_keep_the_bytes_the_server_sent(tmp_path, monkeypatch):
    """open_http is urllib's plain GET: redirects followed, no ~/.netrc credentials, and a
    gzip Content-Encoding left as sent (the sha256 checked is of the server's bytes)."""
    import gzip
    import http.server
    import threading

    gzipped, seen = gzip.compress(b"x" * 1000), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 (http.server's name)
            seen.append({k: self.headers.get(k) for k in ("User-Agent", "Accept", "Authorization")})
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "/simple")
                self.end_headers()
                return
            body = b'{"files": []}' if self.path == "/simple" else gzipped
            self.send_response(200)
            if self.path != "/simple":
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert package_index.fetch_json(base + "/moved") == {"files": []}
        assert package_index.download(base + "/uv.tar.gz") == gzipped
    finally:
        server.shutdown()
        server.server_close()
    json_headers = {"User-Agent": "mlx-fleet-lock", "Accept": "application/vnd.pypi.simple.v1+json",
                    "Authorization": None}
    assert seen == [json_headers, json_headers, {"User-Agent": "mlx-fleet-lock", "Accept": None, "Authorization": None}]


# ---------------------------------------------------------------- names, writing, the index

@pytest.mark.parametrize("where, name, value", [
    ("wheel", "filename", "../../../.ssh/authorized_keys"),
    ("build", "filename", "cpython-3.12.16/../../x.tar.gz"),
    ("build", "key", "../cpython-3.12.16-macos-aarch64-none"),
    ("build", "key", ".hidden"),
])
def test_a_lock_whose_file_names_would_leave_their_folder_is_refused(tmp_path, where, name, value):
    data, _ = env_lock.load_lock(REPO / "inventory" / "example" / ".mlx-env.lock.json")
    (data["packages"][0]["files"][0] if where == "wheel" else data["python_builds"][0])[name] = value
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EnvLockError, match=rf"{path}: the .* {re.escape(repr(value))} is not a plain file name"):
        env_lock.load_lock(path)
    with pytest.raises(EnvLockError, match="is not a plain file name"):
        env_lock.write_lock(data, tmp_path / "new.json")
    assert not (tmp_path / "new.json").exists()


def test_python_builds_refuse_a_build_name_with_a_path_in_it():
    escaping = _build("darwin", "aarch64", "none", 16, "2" * 64)
    escaping["url"] = escaping["url"].replace("cpython-3.12.16", "..%2F..%2Fcpython-3.12.16")
    body = _uv_sdist({"m16": escaping})
    with pytest.raises(EnvLockError, match=r"the CPython build file name '\.\./\.\./cpython-3\.12\.16"):
        env_lock_resolve.python_builds(DECL, fetch=_sdist_index(body), download=lambda url: body)
    body = _uv_sdist({"m16": dict(_build("darwin", "aarch64", "none", 16, "2" * 64), patch="16/../../x")})
    with pytest.raises(EnvLockError, match="the CPython build key 'cpython-3.12.16/../../x-macos-aarch64-none'"):
        env_lock_resolve.python_builds(DECL, fetch=_sdist_index(body), download=lambda url: body)


def test_a_lock_that_cannot_be_written_whole_leaves_the_previous_one(tmp_path, monkeypatch):
    data, _ = env_lock.load_lock(REPO / "inventory" / "example" / ".mlx-env.lock.json")
    path = tmp_path / ".mlx-env.lock.json"
    path.write_text("the previous lock\n")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        env_lock.write_lock(data, path)
    assert path.read_text() == "the previous lock\n" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_symlinked_lock_stays_a_link_and_the_file_it_names_is_rewritten(tmp_path):
    data, _ = env_lock.load_lock(REPO / "inventory" / "example" / ".mlx-env.lock.json")
    real = tmp_path / "dotfiles" / "mlx-env.lock.json"
    real.parent.mkdir()
    real.write_text("the previous lock\n")
    path = tmp_path / "inventory" / ".mlx-env.lock.json"
    path.parent.mkdir()
    path.symlink_to(real)
    sha = env_lock.write_lock(data, path)
    assert path.is_symlink() and os.readlink(path) == str(real)
    assert env_lock.load_lock(path) == (data, sha) and sorted(os.listdir(path.parent)) == [path.name]


def test_a_lock_is_never_resolved_from_a_plain_http_index():
    with pytest.raises(EnvLockError, match=r"--index http://pypi.example/simple: give an https:// \(or file://\) index"):
        env_lock_resolve.make_lock(DECL, "/nonexistent/uv", index="http://pypi.example/simple")
