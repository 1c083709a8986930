"""macos_sysctl's entry point: main() against real `sysctl` outputs (tests/fixtures/macos)."""

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_sysctl
from module_runner import Commands, fixture, run_module

READ = ("sysctl", "iogpu.wired_limit_mb")
WRITE = ("sysctl", "-w", "iogpu.wired_limit_mb=14000")
# `sysctl name` prints the 'name: value' form (sysctl-hw.perflevel__tirekick-fixtures-m5max__1).
BEFORE = (0, "iogpu.wired_limit_mb: 0\n", "")
AFTER = (0, "iogpu.wired_limit_mb: 14000\n", "")
SET = (0, fixture("sysctl-w-iogpu.wired_limit_mb__mlx-lm-notes__1.txt"), "")  # 'name: old -> new'


def run(reads, write=SET, check_mode=False, diff=False, value="14000", name="iogpu.wired_limit_mb"):
    commands = Commands({READ: list(reads), WRITE: write})
    return run_module(macos_sysctl.main, {"name": name, "value": value}, commands,
                      check_mode=check_mode, diff=diff), commands


def test_a_different_value_is_written_and_read_back():
    result, commands = run([BEFORE, AFTER])
    assert not result.get("failed"), result["msg"]
    assert commands.calls == [READ, WRITE, READ]
    assert (result["changed"], result["previous"], result["value"]) == (True, "0", "14000")


def test_check_mode_writes_nothing():
    result, commands = run([BEFORE], check_mode=True, diff=True)
    assert (result["changed"], result["value"]) == (True, "14000") and commands.calls == [READ]
    assert (result["diff"]["before"], result["diff"]["after"]) == (
        "iogpu.wired_limit_mb: 0\n", "iogpu.wired_limit_mb: 14000\n")


def test_the_same_value_changes_nothing():
    result, commands = run([AFTER], value=14000)
    assert (result["changed"], result["previous"], result["value"]) == (False, "14000", "14000")
    assert commands.calls == [READ]


def test_a_value_the_kernel_did_not_take_fails():
    result, _ = run([BEFORE, BEFORE])
    assert result["failed"] and result["msg"] == "sysctl iogpu.wired_limit_mb is 0 after writing 14000"


def test_an_unknown_name_fails_naming_it():
    unknown = (1, "", "sysctl: unknown oid 'iogpu.wired_limit_mb'\n")  # sysctl-unknown-oid__msbg-bench-notes__1
    result, _ = run([unknown])
    assert result["failed"] and result["msg"] == "sysctl: unknown oid 'iogpu.wired_limit_mb' on this Mac"


def test_a_refused_write_fails_with_sysctl_s_words():
    result, _ = run([BEFORE], write=(1, "", "sysctl: iogpu.wired_limit_mb=14000: Operation not permitted\n"))
    assert result["failed"] and result["msg"] == (
        "/usr/bin/sysctl -w iogpu.wired_limit_mb=14000 failed (rc 1): "
        "sysctl: iogpu.wired_limit_mb=14000: Operation not permitted")


@pytest.mark.parametrize("args, message", [
    ({"name": "kern;reboot", "value": "1"}, "name 'kern;reboot' is not a sysctl name"),
    ({"name": "iogpu.wired_limit_mb", "value": "1 2"}, "value '1 2' must be one word"),
    ({"name": "iogpu.wired_limit_mb", "value": True}, "value must be a string or an integer, got True"),
    ({"name": "iogpu.wired_limit_mb"}, "missing required arguments: value"),
])
def test_arguments_are_checked_before_sysctl_runs(args, message):
    commands = Commands({})
    result = run_module(macos_sysctl.main, args, commands)
    assert result["failed"] and result["msg"] == message
    assert commands.calls == []
