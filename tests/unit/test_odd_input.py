"""Odd input never escapes as a traceback: generated and mutated real captures fed to every reader.

Each reader has one documented error type (the parsers ValueError, the capture loader ReplayError,
`record --diff` UserError, the verify cluster loader VerifyError, ...); nothing else may come out.
The inputs are the real captures of tests/fixtures/macos (and files as mlx-fleet writes them) with
lines dropped, doubled, cut, words removed, text inserted, JSON values swapped for other shapes,
plus wholly generated text and JSON nested deeper than Python's recursion limit.

The number of inputs is counted per reader; the last test prints the total (at least 10,000).
"""

from __future__ import annotations

import collections
import inspect
import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model import cluster as cluster_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare import environment as env_declaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import lock_file as env_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import addresses as fabric_addresses
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import run_record
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
from conftest import FIXTURE_DIR, load
from mlx_fleet import record as records
from mlx_fleet.errors import UserError
from mlx_fleet.sim import replay
from mlx_fleet.verify import check_program, jobs, nodes, plan
from replay_dirs import HARDWARE_PORTS, THUNDERBOLT, reference_hardware_ports, reference_thunderbolt, write_capture
from captures import parser_for

COUNT: collections.Counter = collections.Counter()
SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def counted(target: str):
    COUNT[target] += 1


# --- inputs -----------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10)
ODD_TEXT = st.text(max_size=40) | st.sampled_from(["", "\n", " ", "...", ":", "inet", "\t=", "0", "²", "-1",
                                                    "\x00", "\r\n", "Up to", "(*)", "{", "[]", "null"])


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def _json_paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _json_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_paths(item, path + (index,))


def _replace(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return value[:head] + [_replace(value[head], rest, new)] + value[head + 1:]


def _drop(value, path):
    head, rest = path[0], path[1:]
    if rest:
        if isinstance(value, dict):
            return {**value, head: _drop(value[head], rest)}
        return value[:head] + [_drop(value[head], rest)] + value[head + 1:]
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != head}
    return value[:head] + value[head + 1:]


@st.composite
def mutated_json(draw, value):
    """VALUE with one to three of its parts replaced by another JSON shape, or removed."""
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_json_paths(value))
        path = draw(st.sampled_from(paths))
        if path and draw(st.booleans()):
            value = _drop(value, path)
        else:
            value = _replace(value, path, draw(JSON_VALUES))
    return value


@st.composite
def mutated_text(draw, texts):
    """One of TEXTS, changed one to four times the ways a cut, edited or unknown output differs."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["drop", "double", "cut", "insert", "line", "word", "strip", "json", "swap"]))
        if how == "drop":
            del lines[i]
        elif how == "double":
            lines.insert(i, lines[i])
        elif how == "cut":
            text = text[:draw(st.integers(0, len(text)))]
            continue
        elif how == "insert":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(ODD_TEXT) + lines[i][at:]
        elif how == "line":
            lines[i] = draw(ODD_TEXT) + "\n"
        elif how == "word":
            words = lines[i].split(" ")
            del words[draw(st.integers(0, len(words) - 1))]
            lines[i] = " ".join(words)
        elif how == "strip":
            lines[i] = lines[i].strip() + "\n"
        elif how == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "json":
            try:
                value = json.loads(text)
            except ValueError:
                continue
            text = json.dumps(draw(mutated_json(value)), indent=2)
            continue
        text = "".join(lines)
    return text


def odd(texts):
    """Mutated real outputs mostly; sometimes wholly generated text or deeply nested JSON."""
    return st.one_of(mutated_text(texts), mutated_text(texts), mutated_text(texts), ODD_TEXT,
                     st.integers(1, 50_000).map(deep_json))


# --- the parsers ------------------------------------------------------------------------------------

CAPTURES: dict[str, list[str]] = collections.defaultdict(list)
for _path in sorted(FIXTURE_DIR.glob("*__*.txt")):
    CAPTURES[_path.name.split("__")[0]].append(load(_path))


def _after(prefix: str, parsed) -> None:
    """What the callers do next with a parse, which must hold for any parse."""
    if prefix.startswith("ifconfig"):
        mp.interface_of_address(parsed, "10.0.0.1")
    elif prefix == "networksetup-listallhardwareports":
        mp.thunderbolt_interfaces(parsed)
        [mp.is_thunderbolt_port(p["hardware_port"]) for p in parsed]


COMMANDS = {"sw_vers", "sysctl", "sysctl -n", "system_profiler SPHardwareDataType -json", "pmset -g",
            "scutil --get", "networksetup -listnetworkserviceorder", "networksetup -listallhardwareports",
            "networksetup -getinfo", "networksetup -getadditionalroutes", "ifconfig", "SSH_CONNECTION",
            "route -n get", "launchctl print", "system_profiler SPThunderboltDataType -json", "ibv_devices",
            "ibv_devinfo", "rdma_ctl status", "defaults read", "softwareupdate --list", "softwareupdate --install", "fdesetup status",
            "sysctl kern.boottime"}


@pytest.mark.parametrize("prefix", sorted(CAPTURES))
def test_parsers_raise_only_value_error(prefix):
    parser = parser_for(prefix)

    lenient = "warnings" in inspect.signature(parser).parameters

    @settings(max_examples=200, **SETTINGS)
    @given(odd(CAPTURES[prefix]))
    def check(text):
        counted("parsers")
        warnings = []
        for kwargs in ({}, {"warnings": warnings}) if lenient else ({},):
            try:
                parsed = parser(text, **kwargs)
            except ValueError as exc:
                assert str(exc).split(": ", 1)[0] in COMMANDS, exc  # names the command, as _fail does
                continue
            _after(prefix, parsed)
        # A line left out is quoted, naming its command.
        assert all(w.split(": ", 1)[0] in COMMANDS and "unknown wording: " in w for w in warnings), warnings

    check()


@settings(max_examples=300, **SETTINGS)
@given(st.sampled_from([mp.parse_rdma_ctl_status, mp.parse_ssh_connection]),
       odd(["enabled\n", "disabled\n", "192.168.1.9 52022 192.168.1.20 22"]))
def test_one_line_parsers_raise_only_value_error(parser, text):
    counted("parsers")
    try:
        parser(text)
    except ValueError as exc:
        assert str(exc).split(": ", 1)[0] in COMMANDS, exc


# --- hostfiles and the cluster folder -----------------------------------------------------------------

HOSTFILES = [
    {"backend": "jaccl", "envs": ["MLX_METAL_FAST_SYNCH=1"], "hosts": [
        {"ssh": "m1", "ips": ["10.0.0.11"], "rdma": [None, "rdma_en3"]},
        {"ssh": "m2", "ips": ["10.0.0.12"], "rdma": ["rdma_en3", None]}]},
    {"backend": "ring", "envs": [], "hosts": [
        {"ssh": "m1", "ips": ["192.168.0.1"], "rdma": []},
        {"ssh": "m2", "ips": ["192.168.0.2"], "rdma": []}]},
]
ADDRESSES = {"format": "mlx-fleet-addresses/1", "pool": "192.168.0.0/16",
             "cables": {"m1:1 -- m2:1": "192.168.0.0/30", "m1:2 -- m2:2": "192.168.7.4/30"}}


def hostfile_shapes():
    return st.one_of(st.sampled_from(HOSTFILES).flatmap(mutated_json), JSON_VALUES)


@settings(max_examples=700, **SETTINGS)
@given(hostfile_shapes())
def test_hostfile_check_raises_only_value_error(data):
    counted("hostfile")
    try:
        hostfile.Hostfile.from_json(data)
    except ValueError:
        return
    # A hostfile it accepts is one the readers after it can use.
    [(h["ssh"], list(h["ips"])) for h in data["hosts"]]


@settings(max_examples=400, **SETTINGS)
@given(odd([json.dumps(h, indent=4) for h in HOSTFILES]))
def test_record_reads_any_hostfile_text(text):
    counted("hostfile")
    cluster = run_record.record_facts([], {}, {}, text)["cluster"]
    assert isinstance(cluster["envs"], list)


@settings(max_examples=400, **SETTINGS)
@given(odd([json.dumps(h, indent=4) for h in HOSTFILES]), odd([json.dumps(ADDRESSES, indent=2)]))
def test_verify_cluster_loader_raises_only_verify_error(hostfile_text, addresses_text):
    counted("verify cluster folder")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / plan.HOSTFILE).write_text(hostfile_text)
        (folder / cluster_model.LEGACY_FILE).write_text(addresses_text)  # an old ledger: read once
        try:
            cluster = plan.load_cluster(folder)
        except plan.VerifyError as exc:
            assert "\n" not in str(exc)
            return
        cluster.hosts, cluster.backend
        [plan.link_hostfile(cluster, link, "ring") for link in cluster.cables]


# --- ledgers and the run lock's holder record ----------------------------------------------------------

LEDGER = {"format": rdma.LEDGER_FORMAT, "nodes": {
    "m1": {"last_seen_ready": "2026-05-01T10:00:00Z", "product_version": "26.2", "build_version": "25C56",
           "serial_number": "H7QK2XW9Y1"}}}


_MISSING = object()


def read_written(name: str, text: str, reader, error=ValueError):
    """reader(path) on a file NAME holding TEXT; _MISSING when it raised ERROR, whose message must name the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        try:
            return reader(path)
        except error as exc:
            assert str(path) in str(exc)
            return _MISSING


@settings(max_examples=500, **SETTINGS)
@given(odd([json.dumps(ADDRESSES, indent=2)]))
def test_address_ledger_raises_only_value_error(text):
    counted("ledgers")
    previous = read_written(cluster_model.LEGACY_FILE, text, lambda path: cluster_model.read_model(path.parent))
    if previous is not _MISSING:
        fabric_addresses.assign_addresses([parse_cable("m1:1 -- m2:1"), parse_cable("m1:3 -- m2:3")],
                                          "192.168.0.0/16", previous.addresses())


@settings(max_examples=500, **SETTINGS)
@given(odd([json.dumps(LEDGER, indent=2)]))
def test_rdma_ledger_raises_only_value_error(text):
    counted("ledgers")
    ledger = read_written(rdma.LEDGER_FILE, text, rdma.read_ledger)
    if ledger is _MISSING:
        return
    node = SimpleNamespace(status=rdma.NEEDS_RECOVERY, product_version="26.3", build_version="25D1",
                           serial_number="H7QK2XW9Y1", regression=None)
    rdma.note_regressions(SimpleNamespace(nodes={"m1": node}), ledger)
    node.status = rdma.READY
    rdma.update_ledger(ledger, SimpleNamespace(nodes={"m1": node}))


@settings(max_examples=300, **SETTINGS)
@given(odd([json.dumps({"pid": 4242, "what": "mlx-fleet converge", "token": "ab12",
                        "started": "2026-05-01 10:00:00 UTC"})]))
def test_run_lock_holder_record_is_described_whatever_it_holds(text):
    counted("ledgers")
    def described(path: Path) -> str:
        fd = os.open(path, os.O_RDONLY)
        try:
            return runlock.describe(runlock._holder(fd))
        finally:
            os.close(fd)

    assert "\n" not in read_written(runlock.LOCK_FILE, text, described)


@settings(max_examples=300, **SETTINGS)
@given(odd([json.dumps(thunderbolt_services.empty_record(), indent=2)]))
def test_the_macs_network_record_is_refused_in_one_line(text):
    counted("ledgers")
    record = read_written("thunderbolt-network.json", text,
                          lambda path: thunderbolt_services.load_record(str(path)), thunderbolt_services.RecordError)
    assert record is _MISSING or isinstance(record, dict)


@settings(max_examples=300, **SETTINGS)
@given(odd([json.dumps({"format": env_lock.LOCK_FORMAT, "declaration": {}, "packages": []}, indent=2)]))
def test_the_environment_lock_raises_only_lock_error(text):
    counted("ledgers")
    read_written("mlx-env.lock.json", text, env_lock.load_lock, env_declaration.EnvLockError)


# --- the capture loader -------------------------------------------------------------------------------

def _capture_texts() -> dict[str, tuple[tuple[str, ...], str]]:
    hardware = CAPTURES["system_profiler-SPHardwareDataType-json"][0]
    return {
        "thunderbolt": (THUNDERBOLT, reference_thunderbolt().decode()),
        "hardware_ports": (HARDWARE_PORTS, reference_hardware_ports().decode()),
        "hardware": (("system_profiler", "SPHardwareDataType", "-json"), hardware),
        "sysctl": (("sysctl", "hw.model", "hw.ncpu"), "hw.model: Mac17,7\nhw.ncpu: 18\n"),
        "sw_vers": (("sw_vers",), CAPTURES["sw_vers"][0]),
        "ifconfig": (("ifconfig",), CAPTURES["ifconfig"][0]),
        "rdma_ctl": (("rdma_ctl", "status"), "enabled\n"),
        "sudo": (("sudo", "-n", "true"), ""),
        "groups": (("id", "-Gn"), "staff admin\n"),
    }


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory):
    return write_capture(tmp_path_factory.mktemp("capture"),
                         {name: (argv, text.encode()) for name, (argv, text) in _capture_texts().items()})


@settings(max_examples=500, **SETTINGS)
@given(st.data())
def test_capture_loader_raises_only_replay_error(capture_dir, data):
    counted("capture loader")
    texts = _capture_texts()
    manifest = json.loads((capture_dir / replay.MANIFEST).read_text())
    name = data.draw(st.sampled_from(sorted(texts) + [replay.MANIFEST]))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for read in manifest["reads"].values():
            (folder / read["file"]).write_bytes((capture_dir / read["file"]).read_bytes())
        if name == replay.MANIFEST:
            text = data.draw(odd([json.dumps(manifest, indent=2)]))
        else:
            (folder / manifest["reads"][name]["file"]).write_text(data.draw(odd([texts[name][1]])))
            text = json.dumps(manifest)
        (folder / replay.MANIFEST).write_text(text)
        try:
            replay.derive(replay.load_capture(folder))
        except replay.ReplayError as exc:
            assert "\n" not in str(exc)


# --- record --diff --------------------------------------------------------------------------------

RECORD = {"format": records.FORMAT, records.TIME_KEY: "2026-05-01T10:00:00Z", "mlx_fleet_version": "0.9.0",
          "inventory": {"path": "/lab/inventory", "git": {"commit": "0123abcd", "dirty": False}},
          "command": None, "not_recorded": [],
          "cluster": {"backend": "jaccl", "hostfile": None, "envs": [], "cables": [], "rdma": {"m1": "ready"}},
          "macs": {"m1": {"macos": {"version": "26.2", "build": "25C56"}, "serial_number": "H7QK2XW9Y1",
                          "packages": {"mlx": {"version": "0.32.4"}}, "wired_limit_mb": 0}}}


@settings(max_examples=1000, **SETTINGS)
@given(odd([json.dumps(RECORD, indent=2)]), odd([json.dumps(RECORD, indent=2)]))
def test_record_diff_raises_only_user_error(text_a, text_b):
    counted("record --diff")
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / "a.json", Path(tmp) / "b.json"]
        for path, text in zip(paths, (text_a, text_b)):
            path.write_text(text)
        try:
            lines = records.diff(records.load(str(paths[0])), records.load(str(paths[1])))
        except UserError as exc:
            assert "\n" not in str(exc)
            return
        assert all("\n" not in line for line in lines)


# --- verify's section and tag markers -----------------------------------------------------------------

MARK = "@@mlx-fleet-verify-section"
SECTIONS = f"{MARK} sw_vers\n{CAPTURES['sw_vers'][0]}\n{MARK} end 0\n{MARK} ifconfig\n{CAPTURES['ifconfig'][0]}\n{MARK} end 0\n"
TAG = check_program.TAG
TAGGED = "".join([f"{TAG} 0 0 event {json.dumps({'event': 'start'})}\n",
                  f"{TAG} 0 1 out {json.dumps('hello')}\n",
                  f"{TAG} 0 2 {check_program.OUT}{check_program.MORE} {json.dumps('a long ')}\n",
                  f"{TAG} 0 3 {check_program.OUT} {json.dumps('line')}\n",
                  f"{TAG} 0 4 out {json.dumps(json.dumps({'record': 'error', 'message': 'boom'}))}\n",
                  f"{TAG} 0 5 event {json.dumps({'event': 'timeout', 'deadline': 30})}\n",
                  f"{TAG} 0 6 event {json.dumps({'event': 'exit', 'code': 0})}\n",
                  f"{TAG} 1 0 event {json.dumps({'event': 'exit', 'code': 1})}\n"])


@settings(max_examples=600, **SETTINGS)
@given(odd([SECTIONS]))
def test_verify_sections_read_any_text(text):
    counted("verify markers")
    for name, (rc, out) in nodes._sections(text).items():
        assert isinstance(rc, int) and isinstance(out, str)
    node = nodes._node("m1", SimpleNamespace(returncode=0, stdout=text.encode(), stderr=b""), None)
    node.macos, node.ports, node.interfaces


@settings(max_examples=700, **SETTINGS)
@given(odd([TAGGED]))
def test_verify_tagged_lines_read_any_text(text):
    counted("verify markers")
    tagged = check_program.read_tagged(text.splitlines())
    jobs.whole(tagged, 2)
    for rank, state in tagged.items():
        one = jobs.Rank(rank, "m1", state["lines"], state["events"], state["garbled"])
        assert "\n" not in one.outcome()
        one.error, one.records, one.ok


def test_inputs_counted(request, capsys):
    """The total, printed for the record; it counts only when the whole file ran."""
    if request.config.option.keyword or request.config.option.markexpr or len(COUNT) < 7:
        pytest.skip("counts only when the whole file runs")
    total = sum(COUNT.values())
    line = f"odd input: {total} inputs ({', '.join(f'{k} {v}' for k, v in sorted(COUNT.items()))})"
    with capsys.disabled():
        print("\n" + line)
    assert total >= 10_000
