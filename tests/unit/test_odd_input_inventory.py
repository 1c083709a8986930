"""Odd inventories never escape the inventory editor as anything but NotEditable, and never lose data.

The inputs are the inventories of tests/unit/test_inventory_edit.py and inventory/example, mutated the ways
test_odd_input.py mutates real captures (its `mutated_text`), plus the YAML a person writes that the editor
must not rewrite: anchors, aliases and merge keys, Jinja expressions and variables where a list or mapping
goes, tabs, CRLF endings, bytes that are not UTF-8. For each: `inventory_edit.apply` returns, or raises
NotEditable (one line) having written nothing, every file byte for byte; what it writes keeps every host of
every group and every cable it was not asked to remove.

The inputs are counted; the last test checks the total (at least 5,000 with MLX_FLEET_DEEP_PROPERTIES=1,
1,000 by default: conftest.examples).
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples
from test_inventory_edit import ALIASED_HOSTS, INVENTORY
from test_odd_input import ODD_TEXT, SETTINGS, mutated_text
from mlx_fleet.inventory_edit import CABLES, GROUP, Edit, NotEditable, apply

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory" / "example"
EXAMPLE_HOSTS = (EXAMPLE / "hosts.yml").read_text()
EXAMPLE_VARS = (EXAMPLE / "group_vars" / "mlx_cluster.yml").read_text()
COUNT: collections.Counter = collections.Counter()
# ruamel warns of an anchor defined twice (YAML allows it); such a file is judged like any other.
pytestmark = pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning")

# What a person writes in an inventory beyond plain mappings and lists: shared nodes, templated values.
YAML_LINES = ["    defaults: &defaults", "      <<: *defaults", "  mlx_fleet_cables: *plan", "plan: &plan",
              "- studio-9:1 -- studio-1:1", "mlx_fleet_cables: \"{{ lab_cables }}\"", "hosts: *macs",
              "      hosts: {{ hosts }}", "        studio-4:", "      vars: !vault |", "\tstudio-5:",
              "mlx_fleet_cables:", "  - studio-1:2 -- studio-2:2", "---", "...", "? complex", "%YAML 1.2",
              "  mlx_cluster: &group", "  other: *group", "  children:", "    mlx_cluster:"]
EDITS = [
    Edit("studio-4", {"mlx_fleet_model": "studio-m3-ultra", "mlx_fleet_location": "Rack A, shelf 4"},
         ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3"]),
    Edit("studio-2", {"ansible_host": "10.0.0.2"}, [], ["studio-1:2 -- studio-2:2"]),
    Edit("mini-1", {}, ["mini-1:1 -- studio-1:1"], ["studio-2:3 -- studio-3:3"]),
]


@st.composite
def inventory_text(draw, texts):
    """One of TEXTS mutated as a capture is, or with lines of YAML_LINES put in."""
    text = draw(mutated_text(texts)) if draw(st.booleans()) else draw(st.sampled_from(texts))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        indent = " " * draw(st.sampled_from([0, 2, 4, 6, 8]))
        lines.insert(at, indent + draw(st.sampled_from(YAML_LINES) | ODD_TEXT) + "\n")
    return "".join(lines)


NAMES = st.sampled_from(["studio-1", "studio-2", "studio-3", "mini-1", "studio-4", "'studio-5'"])
CABLE = st.sampled_from(["studio-1:2 -- studio-2:2", "studio-2:3 -- studio-3:3", "'mini-1:1 -- studio-1:1'",
                         "studio-1:4 -- studio-4:2", "not a cable", "\"{{ extra }}\""])


def _block(items: list[str], indent: int, mapping: bool) -> str:
    return "".join(f"\n{' ' * indent}{'' if mapping else '- '}{item}{':' if mapping else ''}" for item in items)


@st.composite
def shaped_inventory(draw) -> str:
    """An inventory as people write them: the hosts and the cables as a block, a flow, an alias, a merge,
    a Jinja expression, nothing; another group sharing them or not."""
    hosts = draw(st.lists(NAMES, max_size=4, unique=True))
    cables = draw(st.lists(CABLE, max_size=4, unique=True))
    hosts_value = draw(st.sampled_from([
        _block(hosts, 8, True), " {%s}" % ", ".join(f"{h}: " for h in hosts), " *macs", "\n        <<: *macs",
        "\n        <<: *macs" + _block(["studio-9"], 8, True), "", ' "{{ groups.all }}"']))
    offset = draw(st.sampled_from([0, 2]))  # where a list's dash goes under its key, the same everywhere
    cables_value = draw(st.sampled_from([
        _block(cables, 8 + offset, False), " [%s]" % ", ".join(cables), " *plan", "", ' "{{ lab_cables }}"',
        " lab_cables", " {a: b}"]))
    other = draw(st.sampled_from(["", "    backups:\n      hosts: *macs\n",
                                  "    backups:\n      hosts:" + _block(hosts[:1], 8, True) + "\n"]))
    text = ("all:\n  children:\n    mlx_cluster:\n      hosts:" + hosts_value + "\n      vars:\n        ansible_user: "
            "admin\n        mlx_fleet_cables:" + cables_value + "\n" + other)
    # An anchor ruamel keeps only where an alias names it: defined when used.
    if "*plan" in text:
        text = "plan: &plan" + _block(cables, offset, False) + "\n" + text
    if "*macs" in text:
        text = "macs: &macs" + _block(hosts, 2, True) + "\n" + text
    return draw(mutated_text([text])) if draw(st.integers(0, 4)) == 0 else text


@st.composite
def file_bytes(draw, texts):
    """inventory_text as bytes: UTF-8 mostly, sometimes with CRLF endings, Latin-1 or a stray byte."""
    text = draw(inventory_text(texts) | shaped_inventory() | shaped_inventory())
    how = draw(st.sampled_from(["utf-8"] * 6 + ["crlf", "latin-1", "stray"]))
    if how == "crlf":
        return text.replace("\n", "\r\n").encode("utf-8", "surrogatepass")
    data = text.encode("utf-8", "surrogatepass")
    if how == "latin-1":
        return text.encode("latin-1", "replace")
    if how == "stray":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\xe4"])) + data[at:]
    return data


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _groups(data) -> dict:
    """{group: set of hosts} as a plain YAML reader sees the inventory (top level and all: children)."""
    found: dict = {}

    def walk(groups):
        for name, group in (groups.items() if isinstance(groups, dict) else ()):
            if isinstance(group, dict):
                hosts = group.get("hosts")
                found.setdefault(name, set()).update(hosts if isinstance(hosts, dict) else ())
                walk(group.get("children"))
    walk(data)
    return found


def _get(node, *keys):
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _cable_values(data, vars_data) -> list:
    """mlx_fleet_cables in each place the editor looks (group_vars, the group's vars, all: vars)."""
    group = _get(data, "all", "children", GROUP) or _get(data, GROUP)
    return [_get(vars_data, CABLES), _get(group, "vars", CABLES), _get(data, "all", "vars", CABLES)]


def _load(data: bytes):
    try:
        return yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None


def check_edit(files: dict[str, bytes], edit: Edit) -> None:
    """apply on FILES (name: bytes) in a fresh folder: NotEditable with every file as it was, or an edit that
    keeps every host and every cable it was not asked to remove."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        before = _snapshot(folder)
        try:
            changed = apply([str(folder)], edit)
        except NotEditable as exc:
            assert "\n" not in str(exc)
            assert _snapshot(folder) == before
            COUNT["refused"] += 1
            return
        COUNT["edited" if changed else "unchanged"] += 1
        after = _snapshot(folder)
        old, new = _load(before["hosts.yml"]), _load(after["hosts.yml"])
        if old is None or new is None:
            return  # a file only ruamel reads (YAML 1.2); what it holds is compared above it, as written
        old_vars, new_vars = (_load(snap.get("group_vars/mlx_cluster.yml", b"")) for snap in (before, after))
        for group, hosts in _groups(old).items():  # no host lost, none joining another group
            assert _groups(new).get(group) == (hosts | {edit.host} if group == GROUP else hosts), group
        for was, now in zip(_cable_values(old, old_vars), _cable_values(new, new_vars)):
            if isinstance(was, list):  # every cable kept but those removed
                assert isinstance(now, list) and {str(c) for c in was} - set(edit.remove_cables) <= set(map(str, now))
            elif was is not None:  # a Jinja expression or a variable: as it was
                assert now == was


@settings(max_examples=examples(3500), **SETTINGS)
@given(file_bytes([INVENTORY, ALIASED_HOSTS, EXAMPLE_HOSTS]), st.sampled_from(EDITS))
def test_one_inventory_file_is_edited_faithfully_or_refused_untouched(data, edit):
    COUNT["inventory files"] += 1
    check_edit({"hosts.yml": data}, edit)


@settings(max_examples=examples(1500), **SETTINGS)
@given(file_bytes([EXAMPLE_HOSTS]), file_bytes([EXAMPLE_VARS]), st.sampled_from(EDITS))
def test_an_inventory_folder_with_group_vars_is_edited_faithfully_or_refused_untouched(hosts, group_vars, edit):
    COUNT["inventory folders"] += 1
    check_edit({"hosts.yml": hosts, "group_vars/mlx_cluster.yml": group_vars}, edit)


def test_inputs_counted(request, capsys):
    """The total, printed for the record; it counts only when the whole file ran."""
    if request.config.option.keyword or request.config.option.markexpr or len(COUNT) < 3:
        pytest.skip("counts only when the whole file runs")
    total = COUNT["inventory files"] + COUNT["inventory folders"]
    with capsys.disabled():
        print(f"\nodd inventories: {total} inputs ({', '.join(f'{k} {v}' for k, v in sorted(COUNT.items()))})")
    assert total >= examples(5_000) and COUNT["refused"] and COUNT["edited"]
