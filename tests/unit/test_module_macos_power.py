"""macos_power's entry point: main() against real `pmset -g custom` outputs (tests/fixtures/macos).

The Mac is the M1 MacBook Pro of pmset-g-custom__amostras-swift-m1__2 (macOS 26.2): AC and
battery sections, sleep 1 and womp 1 on AC, womp 0 on battery, no autorestart setting.
"""

import re

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_power
from module_runner import Commands, fixture, run_module

READ = ("pmset", "-g", "custom")
MACBOOK = fixture("pmset-g-custom__amostras-swift-m1__2.txt")


def pmset_after(text, **values):
    """The same listing with some settings changed, as pmset -g custom prints it after a write."""
    for name, value in values.items():
        text = re.sub(r"(?m)^( {0} +)\d+$".format(re.escape(name)), r"\g<1>{0}".format(value), text)
    return text


def run(args, reads, writes=(), check_mode=False, diff=False):
    answers = {READ: [(0, text, "") for text in reads]}
    answers.update((write, (0, "", "")) for write in writes)
    commands = Commands(answers)
    return run_module(macos_power.main, args, commands, check_mode=check_mode, diff=diff), commands


def test_only_the_differing_settings_are_written_then_read_back():
    write = ("pmset", "-a", "sleep", "0", "womp", "1")
    result, commands = run({"settings": {"sleep": 0, "womp": 1, "tcpkeepalive": 1}},
                           [MACBOOK, pmset_after(MACBOOK, sleep=0, womp=1)], [write])
    assert not result.get("failed"), result["msg"]
    assert commands.calls == [READ, write, READ]
    assert result["changed"] is True and result["changes"] == {"sleep": 0, "womp": 1}
    assert result["cmd"] == ["/usr/bin/pmset", "-a", "sleep", "0", "womp", "1"]
    assert result["settings"]["Battery Power"] == {"sleep": 0, "womp": 1, "tcpkeepalive": 1}


def test_check_mode_plans_the_write_and_runs_none():
    result, commands = run({"settings": {"sleep": 0}}, [MACBOOK], check_mode=True, diff=True)
    assert result["changed"] is True and result["cmd"] == ["/usr/bin/pmset", "-a", "sleep", "0"]
    assert commands.calls == [READ]
    assert result["diff"]["before"] == "AC Power:\n sleep                1\nBattery Power:\n sleep                1\n"
    assert result["diff"]["after"] == "AC Power:\n sleep                0\nBattery Power:\n sleep                0\n"


def test_settings_already_in_place_change_nothing():
    result, commands = run({"settings": {"womp": 1}, "power_source": "ac"}, [MACBOOK])
    assert (result["changed"], result["changes"], result["cmd"]) == (False, {}, [])
    assert commands.calls == [READ]


def test_a_setting_this_mac_lacks_is_left_alone_with_a_warning():
    result, commands = run({"settings": {"autorestart": 1}}, [MACBOOK])
    assert (result["changed"], result["unsupported"]) == (False, ["autorestart"])
    assert result["warnings"] == ["pmset: this Mac has no 'autorestart' setting for all power; left alone"]
    assert commands.calls == [READ]


def test_a_setting_pmset_did_not_apply_fails():
    write = ("pmset", "-c", "sleep", "0")
    result, _ = run({"settings": {"sleep": 0}, "power_source": "ac"}, [MACBOOK, MACBOOK], [write])
    assert result["failed"] and result["msg"] == "pmset did not apply: sleep=0"


@pytest.mark.parametrize("args, message", [
    ({"settings": {"sleep": "never"}}, "settings: sleep must be a non-negative integer, got 'never'"),
    ({"settings": {"Sleep On Power Button": 0}}, "settings: 'Sleep On Power Button' is not a pmset setting name"),
    ({"settings": {"sleep": 0}, "power_source": "ups"},
     "value of power_source must be one of: all, ac, battery, got: ups"),
    ({}, "missing required arguments: settings"),
])
def test_arguments_are_checked_before_pmset_runs(args, message):
    result, commands = run(args, [MACBOOK])
    assert result["failed"] and result["msg"] == message
    assert commands.calls == []


def test_an_unreadable_pmset_fails_naming_it():
    result, _ = run({"settings": {"sleep": 0}}, ["Sleep is fine\n"])
    assert result["failed"] and result["msg"] == "pmset -g: unexpected header 'Sleep is fine'"
