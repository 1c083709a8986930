"""The folders show the flow (CONTRIBUTING.md, "Where code lives"): plugin_utils' packages are layered, each
importing only its own layer and those below, and the import graph here is what enforces it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
COLLECTION = "ansible_collections.mlx_fleet.cluster.plugins"
PLUGIN_UTILS = f"{COLLECTION}.plugin_utils"

# Lowest first: a package may import from its own layer and the ones before it, never after. storage: files,
# locks, the output folder; base: the vocabulary (findings, fixes, the Macs' models, versions); declare: what the
# inventory says; model: the cluster model; fabric, rdma and env: the domains (RDMA readiness reads the fabric's
# links, nothing of the fabric reads RDMA's judgement); judge: one judge per fact, and the fabric judged across
# the domains; checks: preflight, inventory, audit, os-update, onboarding over them; render: the sentences and
# printed reports; steps: one controller function per step of a play, what an action plugin translates; glue:
# what the action plugins share with Ansible.
LAYERS = ("storage", "base", "declare", "model", "fabric", "rdma", "env", "models", "judge", "checks", "render", "steps",
          "glue")


def imports(path: Path) -> set[str]:
    """Every module PATH imports, at the top or inside a function (a lazy import hides a cycle, not removes it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def dotted(path: Path) -> str:
    return f"{COLLECTION}." + ".".join(path.relative_to(PLUGINS).with_suffix("").parts)


def layer(module: str) -> str:
    return module[len(PLUGIN_UTILS) + 1:].split(".")[0]


def plugin_utils_modules() -> dict[str, Path]:
    return {dotted(path): path for path in sorted((PLUGINS / "plugin_utils").rglob("*.py"))}


def test_every_plugin_utils_module_is_in_a_layer():
    flat = [path.name for path in (PLUGINS / "plugin_utils").glob("*.py")]
    assert flat == []
    assert {layer(module) for module in plugin_utils_modules()} <= set(LAYERS)


def test_each_layer_imports_only_its_own_and_those_below():
    upward = []
    for module, path in plugin_utils_modules().items():
        here = LAYERS.index(layer(module))
        for imported in imports(path):
            if imported.startswith(PLUGIN_UTILS + ".") and LAYERS.index(layer(imported)) > here:
                upward.append(f"{module} imports {imported}")
    assert sorted(set(upward)) == []


def test_the_collection_stands_alone():
    """No plugin imports the Python package (src/mlx_fleet): a collection-only install has none. The modules,
    which run on the Mac, import only module_utils."""
    wrong = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for imported in imports(path):
            if imported == "mlx_fleet" or imported.startswith("mlx_fleet."):
                wrong.append(f"{path.relative_to(REPO)} imports {imported}")
            on_mac = path.parent.name in ("modules", "module_utils")
            if on_mac and imported.startswith(PLUGIN_UTILS):
                wrong.append(f"{path.relative_to(REPO)} imports {imported}")
    assert wrong == []


def test_code_only_the_cli_uses_lives_in_the_package():
    """The rule for CLI-only code: every plugin_utils module is reached from one of the collection's own
    plugins (actions, callbacks, ...); one only the CLI imports belongs in src/mlx_fleet."""
    modules = plugin_utils_modules()
    entry_points = [path for path in sorted(PLUGINS.rglob("*.py")) if path.parent.name not in
                    ("plugin_utils", "modules", "module_utils") and "plugin_utils" not in path.parts]
    reached, todo = set(), [imp for path in entry_points for imp in imports(path)]
    while todo:
        module = todo.pop()
        if module in modules and module not in reached:
            reached.add(module)
            todo.extend(imports(modules[module]))
    assert sorted(set(modules) - reached) == []
