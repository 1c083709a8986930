"""Odd input to `mlx-fleet watch`: a status.json left by an earlier watch in any shape, intervals that would never
end, and Macs whose text carries terminal controls. The status file is read back with its one documented outcome
(watch_page.read_status: the round, last_good, and what was left out; never an exception), and every line the
watch, verify's summary and onboarding's cable findings print is free of control characters."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlx_fleet import watch
from mlx_fleet import watch_page
from conftest import examples
from mlx_fleet import onboard, watch_cli
from mlx_fleet.cli import build_parser, main
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT
from mlx_fleet.verify import report
from test_odd_input import JSON_VALUES, SETTINGS, odd
from test_watch import BASE, READS, cabled

COUNT = {"status files": 0}
# ESC ] 52 (set the clipboard), ESC [2J (clear the screen), a carriage return (overwrite the line), BEL, NUL...
HOSTILE = ["\x1b]52;c;cm0gLXJmIH4K\x07", "\x1b[2J", "\rfake line", "\x07", "\x00", "\x1b[31m", "\u202e", "\x85"]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> bool:
    """No character that moves the cursor, rings, clears or sets anything (newline only between lines)."""
    return not CONTROL.search(text)


def told(events: list[dict]) -> str:
    """What the watch prints for EVENTS (without --on-change)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        watch_cli.Watch.tell(SimpleNamespace(args=SimpleNamespace(on_change=None)), events)
    return out.getvalue()


def _status(macs: dict[str, dict]) -> dict:
    links = watch.links_found(BASE.hosts, macs)
    findings = watch.assess(BASE, macs)
    return watch_page.status(BASE, macs, links, findings, watch.events({}, findings), generated="2026-12-02T10:00:00Z",
                             round_number=7, last_good={h: m for h, m in macs.items() if m.get("up")})


def sim_mac(host: str) -> dict:
    return cabled()[host] | {"booted_at": None}


REAL = {"a": watch.observe(READS), "b": sim_mac("b")}  # a Mac read from real outputs, and one as the sim gives it
WRITTEN = _status(REAL)


# --- status.json -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, kept_round, left_out", [
    (lambda d: d.update(round="7"), 0, "round"),
    (lambda d: d.update(last_good=["a", "b"]), 7, "last_good"),
    (lambda d: d["last_good"]["a"].update(booted="yesterday"), 7, "last_good a booted"),
    (lambda d: d["last_good"]["b"].update(power=[0]), 7, "last_good b power"),
    (lambda d: d["last_good"].update(b=None), 7, "last_good b"),
])
def test_a_damaged_status_file_is_read_without_what_is_wrong_in_it(tmp_path, capsys, monkeypatch, change, kept_round,
                                                                   left_out):
    """The watch starts from what is left, says what it left out on stderr, and the round runs and rewrites it."""
    data = copy.deepcopy(WRITTEN)
    change(data)
    out = tmp_path / "watch"
    out.mkdir()
    (out / watch_page.STATUS_FILE).write_text(json.dumps(data))
    (tmp_path / "inventory.yml").write_text("all:\n  children:\n    mlx_cluster:\n      hosts:\n        a:\n        b:\n")
    monkeypatch.setattr(watch_cli.Watch, "probe", lambda self: copy.deepcopy(REAL))
    status = main(["watch", "-i", str(tmp_path / "inventory.yml"), "--once", "--out", str(out),
                   "--output-dir", str(tmp_path / "records")])
    assert status == EXIT_ATTENTION  # findings: the round ran
    err = capsys.readouterr().err
    assert err.split(": ")[:2] == ["watch", str(out / watch_page.STATUS_FILE)]
    assert left_out in err and "Traceback" not in err
    written = json.loads((out / watch_page.STATUS_FILE).read_text())
    assert written["round"] == kept_round + 1 and set(written["last_good"]) == {"a", "b"}


# A Mac's record as written, with some of its fields (those changes() reads first) swapped for other JSON.
RECORDS = st.builds(lambda mac, swapped: {**mac, **swapped}, st.sampled_from(list(REAL.values())),
                    st.dictionaries(st.sampled_from(["up", "booted", "build", "fingerprint", "rdma_enabled", "power", "ports", "warnings"]), JSON_VALUES,
                                    max_size=3))
STATUS = st.fixed_dictionaries({
    "format": st.just(watch.FORMAT) | JSON_VALUES, "round": st.integers(-3, 2**70) | JSON_VALUES,
    "last_good": st.dictionaries(st.sampled_from(["a", "b", "c", "\x1b[2J"]), RECORDS | JSON_VALUES, max_size=3)
    | JSON_VALUES})
# The parts of a status file the next round reads, as the watch wrote them, for mutating as text.
READ_BACK = json.dumps({key: WRITTEN[key] for key in ("format", "round")} | {"last_good": {"b": REAL["b"]}}, indent=1)
NOW = copy.deepcopy(REAL)
NOW["b"]["booted"] += 3600  # restarted since
NEW_FINDINGS = watch.events({}, watch.assess(BASE, NOW))


def status_files():
    """Mostly status files of the watch's own shape with parts swapped; sometimes a real one mutated as text."""
    return st.one_of(STATUS.map(json.dumps), STATUS.map(json.dumps), STATUS.map(json.dumps), odd([READ_BACK]))


@pytest.fixture(scope="module")
def status_path(tmp_path_factory):
    return tmp_path_factory.mktemp("watch") / watch_page.STATUS_FILE


@settings(max_examples=examples(5000), **SETTINGS)
@given(text=status_files())
def test_any_status_file_is_read_and_the_next_round_runs(status_path, text):
    COUNT["status files"] += 1
    status_path.write_text(text)
    number, last_good, left_out = watch_page.read_status(status_path)
    assert isinstance(number, int) and number >= 0 and isinstance(last_good, dict)
    assert all(isinstance(line, str) and str(status_path) in line for line in left_out)
    # What one round does with it: compare, say the events, keep this round's readings, write the status again.
    events = watch.changes(BASE, last_good, NOW) + copy.deepcopy(NEW_FINDINGS)
    for event in events:
        event.update(time="2026-12-02T10:01:00Z", round=number + 1)
    assert clean(told(events).replace("\n", ""))
    json.dumps({"round": number + 1, "last_good": {**last_good, **NOW}, "events": events})


def test_status_files_counted(request):
    if request.config.option.keyword or request.config.option.markexpr:
        pytest.skip("counts only when the whole file runs")
    assert COUNT["status files"] >= examples(5000)


# --- intervals ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["watch", "-i", "inv", "--every"], ["watch", "-i", "inv", "--connect-timeout"],
                                  ["watch", "-i", "inv", "--rdma-timeout"],
                                  ["sim", "offer", "--macos-version", "26.5", "--macos-build", "25F84",
                                   "--prepare-seconds"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_an_interval_that_would_never_end_is_refused(argv, value, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser(argv[0]).parse_args(argv + [value])
    assert done.value.code == EXIT_BAD_INPUT
    assert f"{argv[-1]}: {value!r}" in capsys.readouterr().err


# --- what reaches the terminal ------------------------------------------------------------------------------

@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_watch_prints_a_macs_text_escaped(hostile):
    before = {host: sim_mac(host) for host in ("a", "b")}
    now = copy.deepcopy(before)
    now["b"]["build"] = f"26.3 ({hostile}25D20)"
    now["a"]["power"] = {"sleep": 0, "womp": hostile}
    macs = now | {"c": watch.unreachable(f"ssh: banner {hostile}\nsecond line")}
    base = watch.Baseline(["a", "b", "c"], BASE.cables, BASE.rdma_ready, BASE.models, inventory="inv")
    events = watch.changes(base, before, now) + watch.events({}, watch.assess(base, macs))
    assert {e["event"] for e in events} >= {"build", "power", "unreachable", "os-mismatch"}
    for event in events:
        event.update(time="2026-12-02T10:01:00Z")
    printed = told(events)
    # Each line is an event's (its time first) or continues one (indented): none is the Mac's own.
    assert all(line.startswith(("10:01:00 ", "  ")) for line in printed.splitlines())
    assert clean(printed.replace("\n", ""))
    assert hostile not in watch_page.metrics(base, macs | {"a": {**now["a"], "ports": [
        {"receptacle": 1, "rdma_device": f"rdma{hostile}", "rdma_state": "PORT_ACTIVE"}]}}, [], {}, 0.0)
    page = watch_page.render_html(_status(now), None, "no graphviz", None)
    assert hostile not in page and clean(page.replace("\n", ""))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_verify_summary_prints_a_macs_text_escaped(tmp_path, capsys, hostile):
    data = {"summary": "failed (ring, 2 ranks, 1 cable)", "checks": [
        {"kind": "all_sum", "name": "all_sum", "backend": "ring", "status": "failed", "figures": [],
         "failures": [f"rank 1 on b: RuntimeError: {hostile}ring connect failed"]}],
        "links": [], "findings": [{"cause": "mlx", "message": f"b: {hostile}\nTraceback"}], "level": "",
        "level_reasons": [f"b: {hostile}"], "deliverable": [{"item": "owner", "done": False}]}
    report.print_summary(data, tmp_path)
    out = capsys.readouterr().out
    assert "RuntimeError" in out and clean(out.replace("\n", ""))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_onboardings_cable_findings_print_a_macs_text_escaped(monkeypatch, tmp_path, hostile):
    class Found:
        unreachable = {"mini-2": f"ssh: {hostile}gone"}

        def result(self, name):
            return {"cables": {"mini-1:1 -- new:2": 80.0}, "findings": [
                {"kind": "extra", "cable": "mini-3:1 -- new:3", "message": f"new Thunderbolt 3 {hostile}links"}]}

    monkeypatch.setattr(onboard.runner, "run_playbook", lambda *a, **k: Found())
    out = io.StringIO()
    assert onboard.wait_for_cables(["inv"], ["mini-1:1 -- new:2"], tmp_path, 60, {}, out)
    assert len(out.getvalue().splitlines()) == 3 and clean(out.getvalue().replace("\n", ""))


# --- a Mac's own odd outputs ----------------------------------------------------------------------------

def test_a_fingerprint_that_is_no_string_and_a_boot_time_past_any_date_are_warnings():
    mac = watch.observe(READS | {watch.FINGERPRINT_READ: (0, '{"digest": ["abc"]}'),
                                 "boottime": (0, "kern.boottime: { sec = 99999999999999, usec = 0 } Sat Jan  1\n")})
    assert mac["up"] and mac["fingerprint"] is None and mac["booted"] is None and mac["booted_at"] is None
    assert [w.split(":")[0] for w in mac["warnings"]] == [watch.FINGERPRINT_READ, "boottime"]
    macs = {"a": mac, "b": REAL["b"] | {"fingerprint": "abc"}}
    assert "environment-mismatch" not in {f.kind for f in watch.assess(BASE, macs).values()}  # one fingerprint known


@pytest.mark.parametrize("hostfile", ['{"hosts": [], "envs": "MLX_METAL_FAST_SYNCH=1"}', "[" * 100_000 + "]" * 100_000])
def test_a_hostfile_the_watch_cannot_read_is_one_line(tmp_path, capsys, hostfile):
    records = tmp_path / "records"
    records.mkdir()
    (records / "hostfile.json").write_text(hostfile)
    (tmp_path / "inventory.yml").write_text("all:\n  children:\n    mlx_cluster:\n      hosts:\n        a:\n")
    status = main(["watch", "-i", str(tmp_path / "inventory.yml"), "--once", "--output-dir", str(records)])
    assert status == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.split(": ")[:2] == ["mlx-fleet watch", str(records / "hostfile.json")]
    assert "hostfile" in err.split()
