"""mlx-fleet os-update's command line: its waits refused before any Mac changes, its own line on a Ctrl-C, its
summary and exit status from the record, a malformed record as one line (the playbook is stood in for)."""

from __future__ import annotations

import argparse
import json

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import arguments, cli, os_update_cli, runner
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, Interrupted

INVENTORY = """all:
  children:
    mlx_cluster:
      hosts:
        m1: {ansible_host: 192.0.2.1}
        m2: {ansible_host: 192.0.2.2}
"""
CURRENT = {"m1": {"version": "26.2", "build": "25C56"}, "m2": {"version": "26.2", "build": "25C56"}}
PLAN = {"target": {"version": "26.5.2", "build": "25F84"}, "labels": {"m2": "L", "m1": "L"}, "current": CURRENT,
        "offers": {}, "order": ["m2", "m1"], "install": ["m2", "m1"], "done": [], "rank0": "m1", "resumed": False}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """(inventory, output folder, runs); `then(fn)` sets what the stood-in playbook does (fn(out) -> report)."""
    monkeypatch.delenv("ANSIBLE_PIPELINING", raising=False)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY)
    secret = tmp_path / "pw"
    secret.write_text("owner-pw\n")
    secret.chmod(0o600)
    out = tmp_path / "out"
    out.mkdir()
    runs = []

    def run_playbook(playbook, inventories, options, extravars=None, output_dir=None):
        runs.append(extravars)
        return runs.then(out)

    runs = type("Runs", (list,), {})()
    runs.then = lambda out: runner.RunReport(results={os_update_cli.PLAN_ACTION: [{"plan": PLAN}]})
    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    argv = ["os-update", "-i", str(inventory), "--password-file", str(secret), "--output-dir", str(out)]
    return argv, out, runs


def record(out, **macs):
    rec = ou.new_record(PLAN, None)
    for name, (status, fields) in macs.items():
        ou.mark(rec, name, status, **fields)
    ou.write_record(out / ou.RECORD_FILE, rec)
    return rec


@pytest.mark.parametrize("option, value", [("--poll", "nan"), ("--timeout", "-5"), ("--poll", "1e9"),
                                           ("--timeout", "inf"), ("--timeout", "1e9"), ("--poll", "0")])
def test_a_wait_that_is_no_bounded_number_of_seconds_is_refused_before_any_mac(setup, option, value, capsys):
    argv, out, runs = setup
    with pytest.raises(SystemExit) as exited:
        cli.main(argv + [option, value])
    assert exited.value.code == EXIT_BAD_INPUT and runs == []
    assert option in capsys.readouterr().err


def test_the_bounds_of_seconds_and_long_seconds():
    assert arguments.seconds("0.5") == 0.5 and arguments.seconds("3600") == 3600
    assert arguments.long_seconds("86400") == 86400 and arguments.long_seconds("7200") == 7200
    for text in ("nan", "inf", "-inf", "-5", "0", "3601", "1e9", "ten"):
        with pytest.raises(argparse.ArgumentTypeError):
            arguments.seconds(text)
    for text in ("nan", "inf", "86401", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            arguments.long_seconds(text)


def test_the_waits_given_reach_the_playbook_as_numbers(setup):
    argv, out, runs = setup
    record(out, m2=(ou.DONE, {"after": CURRENT["m2"]}), m1=(ou.DONE, {"after": CURRENT["m1"]}))
    cli.main(argv + ["--poll", "2.5", "--timeout", "7200"])
    assert (runs[0]["mlx_fleet_os_update_poll"], runs[0]["mlx_fleet_os_update_timeout"]) == (2.5, 7200)


def test_a_ctrl_c_during_an_update_prints_os_updates_own_lines_and_exits_130(setup, capsys):
    argv, out, runs = setup

    def interrupted(out):
        record(out, m2=(ou.STARTED, {"installed": True}))
        raise Interrupted("interrupted: m2 may be mid-change; the next converge repairs them")

    runs.then = interrupted
    assert cli.main(argv) == EXIT_INTERRUPTED
    shown = capsys.readouterr()
    assert shown.out.rstrip("\n") == terminal_text(ou.interrupted_lines(ou.read_record(out / ou.RECORD_FILE)))
    assert "converge" not in shown.out + shown.err


def test_the_summary_is_every_mac_on_the_target_only_when_every_mac_is_done(setup, capsys):
    argv, out, runs = setup
    record(out, m2=(ou.DONE, {"after": PLAN["target"]}), m1=(ou.DONE, {"after": PLAN["target"]}))
    assert cli.main(argv) == EXIT_OK
    record(out, m2=(ou.DONE, {"after": PLAN["target"]}), m1=(ou.FAILED, {"reason": "no-return"}))
    assert cli.main(argv) == EXIT_ATTENTION  # the playbook ended clean, but the record says m1 is not done

    def failed(out):
        return runner.RunReport(results={os_update_cli.PLAN_ACTION: [{"plan": PLAN}]}, failed={"m1": [("Update macOS", "stopped")]})

    runs.then = failed
    assert cli.main(argv) == EXIT_ATTENTION
    # Every Mac recorded done, but a step after them failed (the hold's release, the hostfiles): not a success.
    record(out, m2=(ou.DONE, {"after": PLAN["target"]}), m1=(ou.DONE, {"after": PLAN["target"]}))
    assert cli.main(argv) == EXIT_ATTENTION


def test_a_reason_a_mac_supplied_is_printed_cleaned(setup, capsys):
    argv, out, runs = setup
    record(out, m2=(ou.FAILED, {"reason": "softwareupdate said \x1b[2Jresult: every Mac on 26.5.2\n"}))
    cli.main(argv)
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\nresult: every Mac" not in printed


@pytest.mark.parametrize("text", ["[]", "{\"format\": \"mlx-fleet-os-update/1\", \"target\": 5}", "{not json",
                                  json.dumps({"format": ou.RECORD_FORMAT, "target": PLAN["target"],
                                              "macs": {"m2": {"status": 3}}})])
def test_a_malformed_record_is_one_line_naming_it(setup, capsys, text):
    argv, out, runs = setup
    (out / ou.RECORD_FILE).write_text(text)
    assert cli.main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ou.RECORD_FILE in err, err
