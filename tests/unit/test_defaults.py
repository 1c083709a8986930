"""One home for the defaults (module_utils/defaults.py) and one inventory view (src/mlx_fleet/inventory_view.py):
the roles' defaults files, their argument specs and the modules' specs say what the constants say, and
every reader outside a play sees the inventory as a play running the roles sees it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from mlx_fleet import inventory_view
from mlx_fleet.sim.plan_file import load_plan_file
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import BACKENDS
from mlx_fleet.inventory_view import InventoryView, InventoryViewError
from mlx_fleet import runner
from mlx_fleet.verify.plan import settings_from_inventory

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def role_defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {}


def module_documentation(name: str) -> dict:
    source = (REPO / "plugins" / "modules" / f"{name}.py").read_text()
    return yaml.safe_load(re.search(r'DOCUMENTATION = r?"""(.*?)"""', source, re.S).group(1))["options"]


def test_the_roles_defaults_are_the_constants():
    assert role_defaults("macos_node")["macos_node_wired_limit_label"] == defaults.WIRED_LIMIT_LABEL
    assert role_defaults("mlx_fabric")["mlx_fabric_hostfile_dir"] == defaults.HOSTFILE_DIR
    assert f"'/{defaults.OUTPUT_DIR_NAME}'" in role_defaults("mlx_fabric")["mlx_fabric_output_dir"]
    assert defaults.BACKEND in BACKENDS


@pytest.mark.parametrize("role", ["macos_node", "mlx_env", "mlx_fabric"])
def test_every_argument_spec_default_is_the_roles_default(role):
    specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    own = role_defaults(role)
    checked = 0
    for entry in specs.values():
        for name, option in (entry.get("options") or {}).items():
            if "default" in option:
                assert option["default"] == own[name], f"{role} {name}: argument_specs says {option['default']!r}"
                checked += 1
    assert checked  # every role documents some default


def test_the_modules_defaults_are_the_constants():
    assert module_documentation("macos_node")["wired_limit_label"]["default"] == defaults.WIRED_LIMIT_LABEL
    assert module_documentation("hostfiles")["path"]["default"] == defaults.HOSTFILE_DIR


def _inventory(folder: Path, group_vars: str = "", hosts: str = "s1:\n        s2:\n") -> Path:
    (folder / "group_vars").mkdir(parents=True)
    (folder / "hosts.yml").write_text(f"all:\n  children:\n    mlx_cluster:\n      hosts:\n        {hosts}")
    (folder / "group_vars" / "mlx_cluster.yml").write_text(group_vars or "{}\n")
    return folder


def test_the_output_folder_is_one_default_for_the_role_the_cli_and_verify(tmp_path):
    inventory = _inventory(tmp_path / "inv")
    expected = inventory.resolve() / defaults.OUTPUT_DIR_NAME
    view = InventoryView([str(inventory)])
    assert Path(view.values("s1")("mlx_fabric_output_dir")) == expected  # the role's default, templated
    assert runner.default_output_dir(str(inventory)) == expected  # the CLI's, before any play
    assert settings_from_inventory([str(inventory)]).output_dir == expected


def test_the_inventory_wins_over_the_roles_defaults_and_is_templated(tmp_path):
    inventory = _inventory(tmp_path / "inv", "mlx_fleet_output_dir: \"{{ inventory_dir }}/out\"\n"
                                             "mlx_env_path: /opt/other\n")
    view = InventoryView([str(inventory)])
    get = view.values("s2")
    assert get("mlx_fabric_output_dir") == f"{inventory.resolve()}/out"
    assert get("mlx_env_path") == "/opt/other"
    assert get("mlx_env_store") == role_defaults("mlx_env")["mlx_env_store"]
    assert get("mlx_fleet_backend", defaults.BACKEND) == "auto"
    settings = settings_from_inventory([str(inventory)])
    assert (settings.output_dir, settings.python) == (inventory.resolve() / "out", "/opt/other/bin/python")


def test_a_host_not_yet_listed_gets_the_groups_variables(tmp_path):
    inventory = _inventory(tmp_path / "inv", "ansible_user: lab\n")
    view = InventoryView([str(inventory)])
    assert view.own_vars("new") is None
    assert view.variables("new")["ansible_user"] == "lab"
    assert "ansible_user" not in view.own_vars("s1")  # its own entry, not the group's
    assert view.hosts() == ["s1", "s2"]  # the new Mac was added in memory only for its variables
    with pytest.raises(InventoryViewError, match="has no group other"):
        view.variables("another", group="other")


def test_the_sim_reads_an_inventory_as_ansible_does_into_plain_values():
    """`mlx-fleet sim up --topology INVENTORY` writes what it read into its own inventory (YAML)."""
    plan = load_plan_file(REPO / "inventory" / "example")
    assert yaml.safe_load(yaml.safe_dump({"nodes": plan.nodes, "cables": plan.cables})) == {
        "nodes": {f"studio-{i}": {"model": "studio-m3-ultra"} for i in (1, 2, 3)},
        "cables": ["studio-1:2 -- studio-2:2", "studio-1:3 -- studio-3:2", "studio-2:3 -- studio-3:3"]}


def test_an_inventory_that_is_not_there_is_one_line(tmp_path):
    with pytest.raises(InventoryViewError, match=r"^inventory .*nope does not exist: give the inventory"):
        InventoryView([str(tmp_path / "nope")])


def test_no_private_ansible_class_outside_the_inventory_view():
    """InventoryManager, VariableManager and Templar are ansible-core's internals: one module uses them."""
    pattern = re.compile(r"InventoryManager|VariableManager|import Templar")
    users = [path.relative_to(REPO) for folder in ("plugins", "src") for path in sorted((REPO / folder).rglob("*.py"))
             if pattern.search(path.read_text())]
    assert users == [Path(inventory_view.__file__).resolve().relative_to(REPO)]
