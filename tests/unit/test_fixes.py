"""Fix commands come from one place (plugin_utils.base.fixes) and fit the install: mlx-fleet's commands when the run
came from the CLI, the collection's playbooks by FQCN otherwise; never a clone's site.yml."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import checklist
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from factories import minis

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("playbook, cli, want", [
    ("site", True, "mlx-fleet converge -i inv/hosts.yml"),
    ("site", False, "ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.site"),
    ("hostfile", True, "mlx-fleet hostfile -i inv/hosts.yml"),
    ("checklist", False, "ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.checklist"),
    ("node", True, "ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.node"),  # no command of its own
    ("env", False, "ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.env"),
    ("lock", True, "mlx-fleet lock -i inv/hosts.yml"),
    ("lock", False, "ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.lock"),
])
def test_the_command_fits_the_install(playbook, cli, want):
    assert fixes.run_command(playbook, "inv/hosts.yml", cli=cli) == want


def test_every_playbook_a_fix_names_is_in_the_collection():
    assert [name for name in fixes.PLAYBOOKS if not (REPO / "playbooks" / f"{name}.yml").is_file()] == []


def test_an_inventory_path_is_quoted_for_the_shell():
    # As a shell reads them back: the inventory one word, its ';' no command separator.
    assert shlex.split(fixes.run_command("site", "my lab/hosts.yml", cli=True)) == [
        "mlx-fleet", "converge", "-i", "my lab/hosts.yml"]
    assert shlex.split(fixes.run_command("site", ["inv", "my lab"], cli=True)) == [
        "mlx-fleet", "converge", "-i", "inv", "-i", "my lab"]
    filled = fixes.fill("{checklist}, then {site}; {inventory}", "a;b")
    assert list(shlex.shlex(filled, posix=True, punctuation_chars=True)) == [
        "ansible-playbook", "-i", "a;b", "mlx_fleet.cluster.checklist", ",", "then",
        "ansible-playbook", "-i", "a;b", "mlx_fleet.cluster.site", ";", "a;b"]


@pytest.mark.parametrize("value, want", [(True, True), ("true", True), ("yes", True), (False, False),
                                         ("false", False), (None, False)])
def test_the_cli_says_so_in_an_extra_variable(value, want):
    assert fixes.uses_cli({} if value is None else {fixes.CLI_VAR: value}) is want


def test_the_cli_passes_it_on_every_run(monkeypatch, tmp_path):
    import ansible_runner

    from mlx_fleet import runner

    class Stop(Exception):
        pass

    seen = {}

    def run(**kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(ansible_runner, "run", run)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {}\n")
    with pytest.raises(Stop):
        runner.run_playbook("site", [str(inventory)], extravars={"mlx_fleet_output_dir": "out"}, progress=False)
    assert seen["extravars"] == {fixes.CLI_VAR: True, "mlx_fleet_output_dir": "out"}


def test_the_checklist_names_the_commands_of_the_install(tmp_path):
    assessment = minis(2, disabled=("mini-2",)).mesh().assess()
    for cli, argv in ((True, {"command": ["mlx-fleet", "checklist", "-i", "inv.yml"],
                              "converge": ["mlx-fleet", "converge", "-i", "inv.yml"]}),
                      (False, {"command": ["ansible-playbook", "-i", "inv.yml", "mlx_fleet.cluster.checklist"],
                               "converge": ["ansible-playbook", "-i", "inv.yml", "mlx_fleet.cluster.site"]})):
        shown = checklist.context(assessment, inventory="inv.yml", output_dir="out", generated="now", cli=cli)
        assert {key: shlex.split(shown[key]) for key in argv} == argv
        text = checklist.write(tmp_path / str(cli), assessment, inventory="inv.yml", generated="now",
                               cli=cli).text.read_text()
        assert all(f"[ ] {shown[key]}\n" in text for key in argv)  # a box to tick for each


def test_no_fix_names_a_clone_only_site_yml():
    found = subprocess.run(["git", "grep", "-n", "site.yml", "--", "plugins", "src"], cwd=REPO, capture_output=True,
                           text=True, check=False).stdout.splitlines()
    # What may name it: the simulator's own notes, and prose about the playbook (not a command to run).
    commands = [line for line in found if "ansible-playbook" in line or "-i " in line]
    assert commands == []


def test_the_models_sync_command_names_the_models_in_the_installs_form():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.fixes import models_sync_command

    assert models_sync_command(["tiny", "my model"], "inv.yml", cli=True) == "mlx-fleet models sync -i inv.yml tiny 'my model'"
    assert models_sync_command(["tiny"], "inv.yml") == (
        "ansible-playbook -i inv.yml mlx_fleet.cluster.models -e '{\"mlx_fleet_models_sync_names\": [\"tiny\"]}'")
