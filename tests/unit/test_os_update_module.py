"""mlx_fleet.cluster.macos_update: main() run as Ansible runs it, with a softwareupdate that is a script answering
in a real Mac's words (tests/fixtures/macos/softwareupdate-install__*) and a log in a folder of the test's."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_update
from ansible.module_utils import basic

SW_VERS = "ProductName:\t\tmacOS\nProductVersion:\t\t26.2\nBuildVersion:\t\t25C56\n"
ARGS = {"label": "macOS Tahoe 26.5.2-25F84", "build": "25F84", "user": "admin", "password": "pw", "confirm_timeout": 5}


@pytest.fixture
def mac(monkeypatch, tmp_path):
    """A Mac on 25C56; `tool(body)` makes its softwareupdate a shell script, which records each run in `runs`."""
    runs = tmp_path / "runs"
    monkeypatch.setattr(macos_update, "run_reads", lambda module, names: {"sw_vers": (0, SW_VERS, "")})
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False: str(tmp_path / name))

    def tool(body: str):
        script = tmp_path / "softwareupdate"
        script.write_text(f"#!/bin/sh\necho run >> {runs}\n{body}\n")
        script.chmod(0o755)

    folder = tmp_path / "logs"
    folder.mkdir(mode=0o755)
    return type("Mac", (), {"tool": staticmethod(tool), "runs": runs, "log": folder / "install.log",
                            "folder": folder})


def update(run_module, mac, check=False, **args):
    return run_module(macos_update.main, dict(ARGS, log=str(mac.log), _ansible_check_mode=check, **args))


def test_check_mode_starts_no_install(run_module, mac):
    mac.tool("echo 'Downloading macOS Tahoe 26.5.2'")
    result = update(run_module, mac, check=True)
    assert result["changed"] and not result["started"] and not mac.runs.exists()


def test_a_silent_nonzero_exit_is_a_failure_not_a_start(run_module, mac):
    mac.tool("exit 3")
    result = update(run_module, mac)
    assert result["failed"] and not result["started"] and result["error"] == "exit 3"


def test_downloaded_alone_is_a_start_and_the_log_keeps_what_came_before(run_module, mac):
    earlier, said = "Downloading macOS Tahoe 26.5.2\n", "Downloaded: macOS Tahoe 26.5.2"
    mac.log.write_text(earlier)  # an earlier run's
    mac.log.chmod(0o600)
    mac.tool(f"echo '{said}'")
    result = update(run_module, mac)
    assert result["started"] and result["changed"] and not result.get("failed")
    assert mac.log.read_text() == f"{earlier}{said}\n"
    assert stat.S_IMODE(mac.log.stat().st_mode) == 0o600


def test_an_earlier_runs_output_is_not_this_runs_start(run_module, mac):
    mac.log.write_text("Downloading macOS Tahoe 26.5.2\nDownloaded: macOS Tahoe 26.5.2\n")
    mac.tool("exit 0")
    result = update(run_module, mac)
    assert result["failed"] and not result["started"]


def test_a_log_that_is_a_link_or_in_a_folder_another_account_owns_is_refused(run_module, mac, tmp_path):
    mac.tool("echo 'Downloading macOS Tahoe 26.5.2'")
    target = tmp_path / "elsewhere"
    target.write_text("root's file\n")
    mac.log.symlink_to(target)
    result = update(run_module, mac)
    assert result["failed"] and not mac.runs.exists() and target.read_text() == "root's file\n"
    mac.log.unlink()
    os.chown(mac.folder, 501, 20)
    result = update(run_module, mac)
    assert result["failed"] and not mac.runs.exists() and not mac.log.exists()
    os.chown(mac.folder, 0, 0)
    mac.folder.chmod(0o777)
    assert update(run_module, mac)["failed"] and not mac.runs.exists()


def test_the_password_goes_on_stdin_only(run_module, mac, tmp_path):
    mac.tool(f"read pw; echo \"$pw\" > {tmp_path / 'stdin'}; echo \"$@\" > {tmp_path / 'argv'}; "
             "echo 'Downloading macOS Tahoe 26.5.2'")
    assert update(run_module, mac)["started"]
    assert (tmp_path / "stdin").read_text() == "pw\n" and "pw" not in (tmp_path / "argv").read_text().split()
