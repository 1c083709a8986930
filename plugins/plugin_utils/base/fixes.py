"""The commands a fix tells a person to run, in the form their install has: the CLI's (`mlx-fleet converge
-i INV`) when the run came from mlx-fleet, which says so with the extra variable mlx_fleet_cli, otherwise
the collection's playbook by its FQCN (`ansible-playbook -i INV mlx_fleet.cluster.site`), which both
installs have. Never a path into a clone (site.yml, playbooks/...): a wheel or a collection has none."""

from __future__ import annotations

import json
import shlex

CLI_VAR = "mlx_fleet_cli"  # set by the CLI for every run: the person has the `mlx-fleet` command
# The playbooks the CLI runs under a command of its own.
CLI_COMMANDS = {"site": "converge", "hostfile": "hostfile", "checklist": "checklist", "audit": "audit", "lock": "lock",
                "models_status": "models status", "models": "models sync", "models_prune": "models prune"}
PLAYBOOKS = ("site", "hostfile", "checklist", "node", "env", "audit", "lock", "models_status", "models")


def run_command(playbook: str, inventory: str | list[str], *, cli: bool = False) -> str:
    """The command that runs mlx_fleet.cluster.PLAYBOOK on INVENTORY (one, or several as -i each), for the
    install in use."""
    where = " -i ".join(shlex.quote(str(i)) for i in ([inventory] if isinstance(inventory, str) else inventory))
    if cli and playbook in CLI_COMMANDS:
        return f"mlx-fleet {CLI_COMMANDS[playbook]} -i {where}"
    return f"ansible-playbook -i {where} mlx_fleet.cluster.{playbook}"


def models_sync_command(names: list[str], inventory: str | list[str], *, cli: bool = False) -> str:
    """The command that syncs the models NAMES (`mlx-fleet models sync -i INV NAME...`, or the playbook with
    mlx_fleet_models_sync_names)."""
    command = run_command("models", inventory, cli=cli)
    if cli:
        return " ".join([command, *(shlex.quote(name) for name in names)])
    return f"{command} -e " + shlex.quote(json.dumps({"mlx_fleet_models_sync_names": list(names)}))


def lock_problem(problem: Exception, inventory: str, *, cli: bool = False) -> str:
    """An environment lock problem (env_declaration.EnvLockError) as one line: with the command that resolves the
    lock again, for the install in use, when that is its fix (its relock)."""
    if getattr(problem, "relock", False):
        return f"{problem}; resolve the lock again: {run_command('lock', inventory, cli=cli)}"
    return str(problem)


def inventory_named(task_vars: dict) -> str:
    """The inventory as the person gave it (the CLI's mlx_fleet_inventory), else the play's inventory file."""
    return task_vars.get("mlx_fleet_inventory") or task_vars.get("inventory_file") or "INVENTORY"


def uses_cli(task_vars: dict | None) -> bool:
    """Whether the run came from the mlx-fleet CLI (its extra variable, true as Ansible reads booleans)."""
    from ansible.module_utils.parsing.convert_bool import boolean

    return boolean((task_vars or {}).get(CLI_VAR, False), strict=False)


def fill(template: str, inventory: str, *, cli: bool = False) -> str:
    """TEMPLATE with each {PLAYBOOK} (of PLAYBOOKS) replaced by its command and {inventory} by INVENTORY."""
    for playbook in PLAYBOOKS:
        template = template.replace("{" + playbook + "}", run_command(playbook, inventory, cli=cli))
    return template.replace("{inventory}", shlex.quote(str(inventory)))
