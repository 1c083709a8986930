"""Adding a Mac and its cables to the user's inventory (mlx_fleet.inventory_edit)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from mlx_fleet.inventory_edit import Edit, NotEditable, apply, lines_to_add

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
# Our lab: three Mac Studios in a mesh.
all:
  children:
    mlx_cluster:
      hosts:
        studio-1:
          mlx_fleet_model: studio-m3-ultra   # the first one
          mlx_fleet_location: "Rack A, shelf 1"
        studio-2: {mlx_fleet_model: studio-m3-ultra}
      vars:
        ansible_user: admin
        # cabled by hand in March
        mlx_fleet_cables:
          - studio-1:2 -- studio-2:2   # short cable
          - 'studio-1:3 -- studio-3:2'
"""

NEW = Edit("studio-4", {"mlx_fleet_model": "studio-m3-ultra", "mlx_fleet_location": "Rack A, shelf 4"},
           ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3"])


def test_the_host_and_its_cables_are_added_and_everything_else_is_kept(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    path.chmod(0o640)
    assert list(apply([str(path)], NEW)) == [path]
    text = path.read_text()
    expected = INVENTORY.replace(
        "        studio-2: {mlx_fleet_model: studio-m3-ultra}\n",
        "        studio-2: {mlx_fleet_model: studio-m3-ultra}\n"
        "        studio-4:\n          mlx_fleet_model: studio-m3-ultra\n          mlx_fleet_location: Rack A, shelf 4\n",
    ) + "          - studio-1:4 -- studio-4:2\n          - studio-2:4 -- studio-4:3\n"
    assert text == expected
    assert path.stat().st_mode & 0o777 == 0o640
    # Again: nothing to change, nothing written.
    assert apply([str(path)], NEW) == {}


def _comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("#")]


def test_cables_go_where_the_plan_lives_and_a_moved_cable_is_taken_out(tmp_path):
    folder = tmp_path / "mine"
    shutil.copytree(REPO / "inventory" / "example", folder)
    hosts_before = (folder / "hosts.yml").read_text()
    edit = Edit("studio-4", {"ansible_host": "studio-4.local", "mlx_fleet_model": "studio-m3-ultra"},
                ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3"], ["studio-2:2 -- studio-1:2"])
    changed = list(apply([str(folder)], edit))
    assert changed == [folder / "hosts.yml", folder / "group_vars" / "mlx_cluster.yml"]
    assert (folder / "hosts.yml").read_text().startswith(hosts_before.split("      vars:")[0])
    group_vars = (folder / "group_vars" / "mlx_cluster.yml").read_text()
    vars_before = (REPO / "inventory" / "example" / "group_vars" / "mlx_cluster.yml").read_text()
    # The moved cable out, the new ones in, every other variable and every comment of the person's file kept.
    assert yaml.safe_load(group_vars) == yaml.safe_load(vars_before) | {"mlx_fleet_cables": [
        "studio-1:3 -- studio-3:2", "studio-2:3 -- studio-3:3", "studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3"]}
    assert _comments(group_vars) == _comments(vars_before)


def test_an_inventory_without_a_plan_gets_one_in_the_group_vars(tmp_path):
    path = tmp_path / "inventory.yml"
    before = "all:\n  children:\n    mlx_cluster:\n      hosts:\n        mini-1:\n"
    path.write_text(before)
    apply([str(path)], Edit("mini-2", {"ansible_host": "10.0.0.12"}, ["mini-1:1 -- mini-2:1"]))
    assert path.read_text().startswith(before)  # the person's lines as they were, the new ones after
    assert yaml.safe_load(path.read_text()) == {"all": {"children": {"mlx_cluster": {
        "hosts": {"mini-1": None, "mini-2": {"ansible_host": "10.0.0.12"}},
        "vars": {"mlx_fleet_cables": ["mini-1:1 -- mini-2:1"]}}}}}


@pytest.mark.parametrize("content, name, why", [
    ("[mlx_cluster]\nmini-1\n", "hosts.ini", "is not a YAML inventory"),
    ("all:\n    children:\n      mlx_cluster:\n          hosts: {mini-1: }\n", "hosts.yml", "would not keep its formatting"),
    ("all:\n  children:\n    others:\n      hosts:\n        mini-1:\n", "hosts.yml", "has no group mlx_cluster"),
])
def test_inventories_it_cannot_rewrite_faithfully_are_left_alone(tmp_path, content, name, why):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(NotEditable, match=why):
        apply([str(path)], NEW)
    assert path.read_text() == content


ALIASED_HOSTS = """\
macs: &macs
  studio-1:
  studio-2:
all:
  children:
    mlx_cluster:
      hosts: *macs
    backups:
      hosts: *macs
"""


@pytest.mark.parametrize("content, why", [
    (INVENTORY.replace("""mlx_fleet_cables:
          - studio-1:2 -- studio-2:2   # short cable
          - 'studio-1:3 -- studio-3:2'
""", 'mlx_fleet_cables: "{{ lab_cables + extra_cables }}"\n'), "mlx_fleet_cables is a text, not the list"),
    (INVENTORY.replace("mlx_fleet_cables:", "mlx_fleet_cables: {a: b}\n        was_cables:"),
     "mlx_fleet_cables is a map, not the list"),
    (ALIASED_HOSTS, "mlx_cluster: hosts is shared through a YAML anchor"),
    (ALIASED_HOSTS.replace("hosts: *macs\n    backups", "hosts:\n        <<: *macs\n    backups"),
     "mlx_cluster: hosts is shared through a YAML anchor or merge key"),
    ("studio: &studio\n  mlx_fleet_model: studio-m3-ultra\nall:\n  children:\n    mlx_cluster:\n      hosts:\n"
     "        studio-1: *studio\n        studio-4: *studio\n", "hosts: studio-4 is shared"),
    ("plan: &plan\n- studio-1:2 -- studio-2:2\nall:\n  children:\n    mlx_cluster:\n      hosts:\n        studio-1:\n"
     "      vars:\n        mlx_fleet_cables: *plan\n", "mlx_fleet_cables is shared"),
    (INVENTORY.replace("      vars:\n        ansible_user: admin\n        # cabled by hand in March\n"
                       "        mlx_fleet_cables:\n          - studio-1:2 -- studio-2:2   # short cable\n"
                       "          - 'studio-1:3 -- studio-3:2'\n", "      vars: \"{{ lab_vars }}\"\n"),
     "mlx_cluster: vars is a text, not the mapping"),
])
def test_what_it_cannot_edit_faithfully_is_refused_and_kept_byte_for_byte(tmp_path, content, why):
    path = tmp_path / "hosts.yml"
    path.write_text(content)
    with pytest.raises(NotEditable, match=why):
        apply([str(path)], NEW)
    assert path.read_bytes() == content.encode() and sorted(p.name for p in tmp_path.iterdir()) == ["hosts.yml"]


@pytest.mark.parametrize("data, why", [
    (INVENTORY.replace("Rack A", "R\u00e4ck A").encode("latin-1"), r"hosts.yml is not UTF-8 text \(byte \d+\)"),
    (INVENTORY.replace("\n", "\r\n").encode(), "would not keep its formatting"),
    # Found by tests/unit/test_odd_input_inventory.py: ruamel.yaml raised AttributeError on a merge into itself,
    # IndexError writing back a comment before a lone [].
    (b"macs: &macs\n  studio-1:\n  children:\n    mlx_cluster:\n      hosts:\n        <<: *macs\n",
     "is YAML mlx-fleet cannot read back"),
    (b"# An example cluster.\n[]\n", "is YAML mlx-fleet cannot read back"),
])
def test_an_inventory_it_cannot_read_is_one_line_and_kept(tmp_path, data, why):
    path = tmp_path / "hosts.yml"
    path.write_bytes(data)
    with pytest.raises(NotEditable, match=why) as refused:
        apply([str(path)], NEW)
    assert "\n" not in str(refused.value) and path.read_bytes() == data


def test_every_edit_keeps_its_own_backup(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    first = apply([str(path)], NEW)[path]
    after_first = path.read_text()
    second = apply([str(path)], Edit("studio-5", {}, ["studio-1:5 -- studio-5:2"]))[path]
    assert first != second and first.read_text() == INVENTORY and second.read_text() == after_first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["hosts.yml", first.name, second.name])


def test_the_lines_to_add_by_hand():
    # Three parts, each a heading then its lines indented: the host as YAML, the host as an INI line, the cables.
    parts = []
    for line in lines_to_add(NEW).splitlines():
        if line.startswith(" "):
            parts[-1].append(line)
        else:
            parts.append([])
    yaml_host, ini_host, cables = ("\n".join(part) for part in parts)
    assert yaml.safe_load(yaml_host) == {"studio-4": NEW.host_vars}
    assert shlex.split(ini_host) == ["studio-4"] + [f"{k}={v}" for k, v in NEW.host_vars.items()]
    assert yaml.safe_load(cables) == NEW.add_cables


def test_a_symlinked_inventory_stays_a_link_and_the_previous_text_is_kept(tmp_path):
    real = tmp_path / "dotfiles" / "lab.yml"
    real.parent.mkdir()
    real.write_text(INVENTORY)
    real.chmod(0o640)
    link = tmp_path / "hosts.yml"
    link.symlink_to(real)
    backup = apply([str(link)], NEW)[link]
    assert link.is_symlink() and "studio-4:" in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640
    assert re.fullmatch(r"hosts\.yml\.\d{8}T\d{6}Z\.mlx-fleet\.bak", backup.name) and backup.read_text() == INVENTORY
    assert backup.stat().st_mode & 0o777 == 0o640


def test_an_onboarding_edits_the_inventory_only_under_the_run_lock(tmp_path, monkeypatch):
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
    from mlx_fleet.errors import Busy
    from mlx_fleet.onboard import edit_inventory

    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    monkeypatch.setenv(runlock.WAIT_ENV, "0")
    with runlock.run_lock(tmp_path / ".mlx-fleet", "mlx-fleet onboard of studio-5"):
        with pytest.raises(Busy, match="inventory not changed: .* is in use by mlx-fleet onboard of studio-5"):
            edit_inventory([str(path)], NEW, tmp_path / ".mlx-fleet")
    assert path.read_text() == INVENTORY
    assert list(edit_inventory([str(path)], NEW, tmp_path / ".mlx-fleet")) == [path]
