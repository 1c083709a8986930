"""macos_names' entry point: main() against real `scutil --get` outputs (tests/fixtures/macos).

The Mac's LocalHostName is 'alibaba-inc' and its HostName is not set (scutil prints
'HostName: not set' on stderr and exits 1), as in the chinese-blog-hostname captures.
"""

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_names
from module_runner import Commands, fixture, run_module

GET_LOCAL = ("scutil", "--get", "LocalHostName")
GET_HOST = ("scutil", "--get", "HostName")
GET_COMPUTER = ("scutil", "--get", "ComputerName")
ANSWERS = {
    GET_LOCAL: (0, fixture("scutil-get-LocalHostName__chinese-blog-hostname__1.txt"), ""),
    GET_HOST: (1, "", fixture("scutil-get-HostName__chinese-blog-hostname__1.txt")),
}


def run(args, writes=(), write_answer=(0, "", ""), check_mode=False, diff=False):
    commands = Commands({**ANSWERS, **{write: write_answer for write in writes}})
    return run_module(macos_names.main, args, commands, check_mode=check_mode, diff=diff), commands


def test_only_the_differing_name_is_set():
    write = ("scutil", "--set", "HostName", "studio-1.example.net")
    result, commands = run({"local_host_name": "alibaba-inc", "host_name": "studio-1.example.net"}, [write])
    assert not result.get("failed"), result["msg"]
    assert commands.calls == [GET_LOCAL, GET_HOST, write]
    assert result["changed"] is True and result["changes"] == {"HostName": "studio-1.example.net"}
    assert result["names"] == {"LocalHostName": "alibaba-inc", "HostName": "studio-1.example.net"}


def test_check_mode_and_diff_set_nothing():
    write = ("scutil", "--set", "LocalHostName", "studio-1")
    result, commands = run({"local_host_name": "studio-1"}, [write], check_mode=True, diff=True)
    assert result["changed"] is True and commands.calls == [GET_LOCAL]
    assert result["diff"]["before"] == "LocalHostName: alibaba-inc\n"
    assert result["diff"]["after"] == "LocalHostName: studio-1\n"


def test_names_already_set_change_nothing():
    result, commands = run({"local_host_name": "alibaba-inc"})
    assert (result["changed"], result["changes"]) == (False, {})
    assert commands.calls == [GET_LOCAL]


def test_a_failed_set_fails_naming_the_name():
    write = ("scutil", "--set", "LocalHostName", "studio-1")
    result, _ = run({"local_host_name": "studio-1"}, [write], write_answer=(1, "", "SCPreferencesLock() failed\n"))
    assert result["failed"] and result["msg"] == (
        "/usr/bin/scutil --set LocalHostName studio-1 failed (rc 1): SCPreferencesLock() failed")


def test_a_failed_read_is_not_taken_for_an_unset_name():
    commands = Commands({GET_COMPUTER: (1, "", "scutil: permission denied\n")})
    result = run_module(macos_names.main, {"computer_name": "Studio 1"}, commands)
    assert result["failed"] and result["msg"] == "scutil --get ComputerName failed (rc 1): scutil: permission denied"


@pytest.mark.parametrize("args, message", [
    ({"local_host_name": "studio_1"},
     "local_host_name 'studio_1': use letters, digits and hyphens only (at most 63, no hyphen first or last)"),
    ({"computer_name": "  "}, "ComputerName: an empty name cannot be set"),
    ({}, "one of the following is required: computer_name, local_host_name, host_name"),
])
def test_arguments_are_checked_before_scutil_runs(args, message):
    result, commands = run(args)
    assert result["failed"] and result["msg"] == message
    assert commands.calls == []
