"""explain's knowledge base on real logs (tests/fixtures/logs: each file's name starts with the cause its first
line must name, `unknown` for real logs of failures no rule is about), on noise, on messages several causes produce,
and narrowed by what the Macs show."""

import io
import re
import sys
from pathlib import Path

import pytest

from mlx_fleet import explain
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Port
from mlx_fleet.cli import main
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK

LOGS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "logs").glob("*__*.log"))


def body(path: Path) -> str:
    lines = path.read_text().split("\n")
    assert lines[0].startswith("# source: "), path.name
    return "\n".join(lines[1:])


def test_every_cause_is_said_and_fixed_and_every_rule_names_its_source():
    assert set(explain.MEANING) == set(explain.EVIDENCE) == set(explain.FIX) == set(explain.CAUSES)
    for rule in explain.RULES:
        assert rule.source and set(rule.causes) <= set(explain.CAUSES), rule.pattern
    # Real logs for (nearly) every cause.
    assert {p.name.split("__")[0] for p in LOGS} >= set(explain.CAUSES)
    # The corpus: at least 30 logs published in public threads (the others were produced here).
    assert sum(not p.read_text().startswith("# source: generated here") for p in LOGS) >= 30


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_each_real_log_names_its_cause_in_the_first_line(path, capsys):
    # A log of a failure no rule is about (an Open MPI bug, another program's crash report) is unknown, not a guess.
    cause = path.name.split("__")[0]
    assert main(["explain", str(path)]) == (EXIT_ATTENTION if cause == "unknown" else EXIT_OK)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("cause: ")
    assert cause in first[len("cause: "):].split(" or ")


def test_noise_around_the_message_and_the_launcher_consequence():
    log = ("\x1b[33m[WARN] Node with rank 1 exited with code 1 \x1b[0m\n"
           "2026-11-30 12:00:01 rank 0: loading model...\n"
           "RuntimeError: [ring] Couldn't bind socket (error: 49)\n")
    # The rank's own message, not mlx.launch's account of it.
    assert explain.explain(log).causes[:2] == ["no-ipv4", "hostfile"]
    assert explain.explain("[WARN] Node with rank 1 exited with code 1").causes == ["peer-lost"]


def test_several_causes_are_said_not_guessed_and_the_macs_narrow_them():
    log = "ValueError: [jaccl] Changing queue pair to RTR failed with errno 22"
    plain = explain.explain(log)
    assert plain.causes[:2] == ["stale-rdma", "no-ipv4"] and "bridge" in plain.causes
    lines = explain.report(plain)
    assert "also possible: bridge, mlx-version, os-mismatch" in lines
    # Which read of the Macs tells them apart, from the watch's finding kinds that confirm each cause.
    apart = next(line for line in lines if line.startswith("-i INVENTORY tells them apart: "))
    assert "stale-rdma if the watch finds stale-rdma or rdma-port" in apart and "bridge if the watch finds bridge" in apart
    bridge = Finding("bridge", ("m1",), "service enabled, bridge0 inactive", "off")
    confirmed = explain.explain(log, {("bridge", "m1"): bridge})
    assert (confirmed.causes, confirmed.confirmed) == (["bridge"], {"bridge": [bridge.line]})
    address = Finding("no-ipv4", ("m2",), "Thunderbolt 1 (en2) has no IPv4 address", "10.0.0.1/30", ports=(Port("m2", 1),))
    assert explain.explain(log, {("no-ipv4", Port("m2", 1)): address}).causes == ["no-ipv4"]
    # Nothing on the Macs confirms any: every cause stays, and the report says so.
    unconfirmed = explain.explain(log, {})
    assert unconfirmed.causes == plain.causes
    assert any(line.startswith("the Macs show none of these now") for line in explain.report(unconfirmed))


def test_an_unknown_log_exits_1_and_points_to_the_watch(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text("Traceback (most recent call last):\nKeyError: 'weights'\n")
    assert main(["explain", str(log)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "cause: unknown"
    assert main(["explain", str(tmp_path / "missing.log")]) == 2


def test_each_rule_example_is_its_own_and_docs_troubleshooting_lists_them_all():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text()
    for rule in explain.RULES:
        assert explain.match(rule.example)[0][1] is rule, rule.example
        assert f"| `{rule.example}` | {rule.says} |" in doc, rule.example
    for cause in explain.CAUSES:
        assert f"### {cause}\n" in doc and explain.fix(cause) in doc


def test_the_fixes_take_their_commands_from_the_one_place_in_the_install_s_form():
    # The knowledge base spells no command of its own: each comes from plugin_utils.base.fixes.
    for cause, text in explain.FIX.items():
        assert not re.search(r"mlx-fleet (converge|checklist|hostfile|audit)|ansible-playbook|site\.yml", text), cause
    assert explain.fix("rdma-off", "lab/hosts.yml") == (
        "the Recovery step: mlx-fleet checklist -i lab/hosts.yml, then mlx-fleet converge -i lab/hosts.yml")
    assert explain.fix("rdma-off", "lab/hosts.yml", cli=False) == (
        "the Recovery step: ansible-playbook -i lab/hosts.yml mlx_fleet.cluster.checklist, then "
        "ansible-playbook -i lab/hosts.yml mlx_fleet.cluster.site")
    lines = explain.report(explain.explain("[ring] Couldn't bind socket (error: 49)"), "my lab/hosts.yml", "out")
    assert "  fix: mlx-fleet converge -i 'my lab/hosts.yml' (the fabric step puts the addresses back); if it comes " \
           "back, look for a network manager resetting the ports (exo's io.exo.networksetup LaunchDaemon)" in lines
    assert "  fix: mlx-fleet hostfile -i 'my lab/hosts.yml', and launch with out/hostfile.json" in lines


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_connect_timeout_must_be_a_finite_positive_number(value, tmp_path, capsys):
    # Refused by argparse (exit 2) before any Mac is read: nan compares false with every deadline.
    with pytest.raises(SystemExit) as refused:
        main(["explain", str(tmp_path / "job.log"), "-i", str(tmp_path / "hosts.yml"), "--connect-timeout", value])
    assert refused.value.code == EXIT_BAD_INPUT
    assert "--connect-timeout" in capsys.readouterr().err


def test_stdin_that_is_not_utf8_is_read_with_replacement(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe\x80 [ring] Couldn't bind socket (error: 49)\n")))
    assert main(["explain", "-"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "cause: no-ipv4 or hostfile"
