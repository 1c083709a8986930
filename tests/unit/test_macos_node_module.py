"""mlx_fleet.cluster.macos_node: main() run as Ansible runs it, against a Mac that answers in the
formats of tests/fixtures/macos and records what it is told to change."""

from __future__ import annotations

import os

import pytest
from ansible.module_utils import basic

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands, macos_node_plan, macos_settings
from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_node

NODE = {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1}
LABEL = "org.mlx-fleet.wired-limit"


class Mac:
    """pmset, scutil, sysctl and launchctl as a 64 GB desktop Mac answers them; writes change its state."""

    def __init__(self, pmset: dict, names: dict, limit: int):
        self.pmset, self.names, self.limit = dict(pmset), dict(names), limit
        self.changes: list[list[str]] = []
        self.auto_install: bool | None = None  # AutomaticallyInstallMacOSUpdates never set
        self.defaults_read: tuple[int, str, str] | None = None  # an answer other than the usual ones

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        tool, args = os.path.basename(argv[0]), argv[1:]
        if tool == "pmset" and args == ["-g", "custom"]:
            return 0, "AC Power:\n" + "".join(f" {k:<20} {v}\n" for k, v in self.pmset.items()), ""
        if tool == "scutil" and args[0] == "--get":
            value = self.names.get(args[1])
            return (0, value + "\n", "") if value else (1, "", f"{args[1]}: not set\n")
        if tool == "sysctl" and args[0] != "-w":
            return 0, f"hw.memsize: {64 << 30}\niogpu.wired_limit_mb: {self.limit}\n", ""
        if tool == "defaults" and args[0] == "read":
            if self.defaults_read:
                return self.defaults_read
            if self.auto_install is None:  # the real wording (tests/fixtures/macos/defaults-read-missing__*)
                return 1, "", f"The domain/default pair of ({args[1]}, {args[2]}) does not exist\n"
            return 0, f"{int(self.auto_install)}\n", ""
        self.changes.append([tool, *args])
        if tool == "pmset":
            self.pmset.update((k, int(v)) for k, v in zip(args[1::2], args[2::2]))
        elif tool == "scutil":
            self.names[args[1]] = args[2]
        elif tool == "sysctl":
            self.limit = int(args[1].split("=")[1])
        elif tool == "defaults":
            self.auto_install = args[4] == "true"
        elif args[0] == "bootout":
            return 113, "", f'Bad request.\nCould not find service "{LABEL}" in domain for system\n'
        return 0, "", ""


@pytest.fixture
def mac(monkeypatch, tmp_path):
    desktop = {"Sleep On Power Button": 1, "womp": 1, "autorestart": 0, "sleep": 1, "disksleep": 10}
    found = Mac(desktop, {"ComputerName": "Mac mini", "LocalHostName": "Mac-mini"}, 0)

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: found.run(argv))
    monkeypatch.setattr(macos_commands, "capture", lambda module, argv: found.run(list(argv)))
    monkeypatch.setattr(basic.AnsibleModule, "set_owner_if_different", lambda self, path, owner, changed: changed)
    monkeypatch.setattr(basic.AnsibleModule, "set_group_if_different", lambda self, path, group, changed: changed)
    monkeypatch.setattr(macos_node_plan, "LAUNCH_DAEMONS", str(tmp_path))
    found.plist = tmp_path / f"{LABEL}.plist"
    return found


@pytest.fixture
def run(run_module):
    def run(check=False, diff=False, **args) -> dict:
        defaults = {"power_settings": NODE, "computer_name": "studio-1", "local_host_name": "studio-1"}
        return run_module(macos_node.main, dict(defaults, **args, _ansible_check_mode=check, _ansible_diff=diff))

    return run


def test_a_fresh_mac_is_set_in_one_call_then_nothing_changes(run, mac):
    result = run(wired_limit_fraction=0.85)
    assert result["changed"] and not result.get("failed"), result
    assert mac.changes == [
        ["pmset", "-a", "autorestart", "1", "disksleep", "0", "sleep", "0"],
        ["scutil", "--set", "ComputerName", "studio-1"], ["scutil", "--set", "LocalHostName", "studio-1"],
        ["sysctl", "-w", "iogpu.wired_limit_mb=55705"],
        ["launchctl", "bootout", f"system/{LABEL}"], ["launchctl", "bootstrap", "system", str(mac.plist)]]
    assert mac.plist.read_text() == macos_settings.wired_limit_plist(LABEL, 55705)
    assert oct(mac.plist.stat().st_mode & 0o777) == "0o644"
    assert result["changes"]["launch_daemon"] == "created" and result["wired_limit_mb"] == 55705

    mac.changes.clear()
    again = run(wired_limit_fraction=0.85)
    assert not again["changed"] and mac.changes == []
    assert again["changes"] == {"power": {}, "names": {}}


def test_check_mode_shows_each_difference_and_changes_nothing(run, mac):
    result = run(check=True, diff=True, wired_limit_mb=40000)
    assert result["changed"] and mac.changes == [] and not mac.plist.exists()
    headers = [d["before_header"] for d in result["diff"]]
    assert headers == ["pmset -g custom", "scutil --get", "sysctl iogpu.wired_limit_mb", str(mac.plist)]
    assert " sleep                1\n" in result["diff"][0]["before"]
    assert result["diff"][2]["after"] == "iogpu.wired_limit_mb: 40000\n"


def test_no_limit_removes_the_daemon_and_gives_the_limit_back(run, mac):
    run(wired_limit_mb=40000)
    mac.changes.clear()
    result = run()
    assert result["changes"]["launch_daemon"] == "removed" and result["wired_limit_mb"] == 0
    assert mac.changes == [["sysctl", "-w", "iogpu.wired_limit_mb=0"], ["launchctl", "bootout", f"system/{LABEL}"]]
    assert not mac.plist.exists()
    mac.changes.clear()
    assert not run()["changed"] and mac.changes == []


def test_a_limit_the_mac_cannot_take_is_one_line_and_changes_nothing(run, mac):
    result = run(wired_limit_mb=70000)
    assert result["failed"] and result["msg"] == (
        "wired_limit_mb=70000 is not below this Mac's memory (65536 MB); use a smaller size or a fraction")
    assert mac.changes == []


def test_automatic_macos_installs_turned_off_once(run, mac):
    domain = macos_commands.SOFTWARE_UPDATE_DOMAIN
    result = run(check=True, diff=True, automatic_macos_updates=False)
    assert result["changes"]["automatic_macos_updates"] is False and mac.auto_install is None
    assert result["diff"][-1]["before"] == "None\n" and result["diff"][-1]["after"] == "False\n"
    run(automatic_macos_updates=False)
    assert mac.changes[-1] == ["defaults", "write", domain, "AutomaticallyInstallMacOSUpdates", "-bool", "false"]
    assert mac.auto_install is False
    mac.changes.clear()
    assert not run(automatic_macos_updates=False)["changed"] and mac.changes == []
    mac.auto_install = True  # someone turned it back on in System Settings
    assert run(automatic_macos_updates=False)["changes"]["automatic_macos_updates"] is False
    assert mac.auto_install is False


# A wording no capture shows (one project's notes describe it for macOS 26.6.2, unverified) and a failed read.
@pytest.mark.parametrize("answer", [
    (1, "", "Could not find key 'AutomaticallyInstallMacOSUpdates' in domain '/Library/Preferences/"
            "com.apple.SoftwareUpdate'\n"),
    (134, "", "")])
def test_an_unknown_defaults_answer_leaves_the_setting_alone_with_a_warning(run, mac, answer, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))
    mac.defaults_read = answer
    result = run(automatic_macos_updates=False)
    assert not result.get("failed") and "automatic_macos_updates" not in result["changes"]
    assert not [c for c in mac.changes if c[0] == "defaults"]
    assert [w for w in warnings if w.startswith("AutomaticallyInstallMacOSUpdates: ")]
    assert result["names"] == {"ComputerName": "studio-1", "LocalHostName": "studio-1"}  # the rest was done
