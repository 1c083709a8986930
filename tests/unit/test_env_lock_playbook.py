"""The collection's lock playbook (mlx_fleet.cluster.lock), run by plain ansible-playbook: the environment the
inventory declares reaches uv on the controller, uv's own error is the task's, and no Mac is contacted (the hosts'
addresses answer nobody). Resolving against a real index needs the network: the CLI's `mlx-fleet lock` and this
playbook share plugin_utils.env.lock_resolve.update_lock, whose writing is tested in test_mlx_env_lock.py."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from simlib import run_recorded  # the test-only JSON record of a playbook run (no simulated Mac is made)

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = sys.executable.rsplit("/", 1)[0] + "/ansible-playbook"
UV_SAYS = "error: No solution found when resolving"  # what the fake uv prints


def run_lock(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The playbook on two Macs at TEST-NET addresses, with a uv that records its arguments and fails."""
    calls = tmp_path / "uv-calls"
    uv = tmp_path / "uv"
    uv.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho '{UV_SAYS}' >&2\nexit 1\n")
    uv.chmod(0o755)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"mlx_cluster": {
        "hosts": {"mini-1": {"ansible_host": "192.0.2.1"}, "mini-2": {"ansible_host": "192.0.2.2"}},
        "vars": {"mlx_env_mlx_version": "0.30.0"}}}}}))
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = run_recorded([PLAYBOOK, "-i", str(inventory), str(REPO / "playbooks" / "lock.yml"), "-e",
                           f"mlx_env_lock_uv={uv}", *extra], env, timeout=120, cwd=tmp_path,
                        stdin=subprocess.DEVNULL)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_lock_playbook_hands_the_declaration_to_uv_and_says_uvs_error(tmp_path):
    done, calls = run_lock(tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    tasks = done.recorded["plays"][0]["tasks"]
    resolve = tasks[-1]["hosts"]
    assert list(resolve) == ["mini-1"]  # once, on the controller
    assert resolve["mini-1"]["msg"].endswith(f": {UV_SAYS}")  # uv's own error, passed on whole
    assert len(calls) == 1 and shlex.split(calls[0])[:4] == ["pip", "compile", "--universal", "--generate-hashes"]
    assert "--python-version 3.12" in calls[0] and "--index-url https://pypi.org/simple" in calls[0]
    assert not (tmp_path / ".mlx-env.lock.json").exists()
    stats = done.recorded["stats"]
    assert all(s["unreachable"] == 0 for s in stats.values())  # no Mac was contacted


def test_a_plain_http_index_is_refused_before_uv_runs(tmp_path):
    done, calls = run_lock(tmp_path, "-e", "mlx_env_lock_index=http://pypi.example/simple", "--check")
    assert done.returncode == 2 and calls == []
    resolve = done.recorded["plays"][0]["tasks"][-1]["hosts"]["mini-1"]
    assert resolve["msg"].split(": ")[0] == "--index http://pypi.example/simple" and "https://" in resolve["msg"].split()
