"""The commands a fix tells a person to run, in the form their install has: the CLI's (`mlx-fleet converge
-i INV`) when the run came from mlx-fleet, which says so with the extra variable mlx_fleet_cli, otherwise
the collection's playbook by its FQCN (`ansible-playbook -i INV mlx_fleet.cluster.site`), which both
installs have. Never a path into a clone (site.yml, playbooks/...): a wheel or a collection has none."""

from __future__ import annotations

import shlex

CLI_VAR = "mlx_fleet_cli"  # set by the CLI for every run: the person has the `mlx-fleet` command
# The playbooks the CLI runs under a command of its own.
CLI_COMMANDS = {"site": "converge", "hostfile": "hostfile", "checklist": "checklist", "audit": "audit"}
PLAYBOOKS = ("site", "hostfile", "checklist", "node", "env", "audit")


def run_command(playbook: str, inventory: str | list[str], *, cli: bool = False) -> str:
    """The command that runs mlx_fleet.cluster.PLAYBOOK on INVENTORY (one, or several as -i each), for the
    install in use."""
    where = " -i ".join(shlex.quote(str(i)) for i in ([inventory] if isinstance(inventory, str) else inventory))
    if cli and playbook in CLI_COMMANDS:
        return f"mlx-fleet {CLI_COMMANDS[playbook]} -i {where}"
    return f"ansible-playbook -i {where} mlx_fleet.cluster.{playbook}"


def uses_cli(task_vars: dict | None) -> bool:
    """Whether the run came from the mlx-fleet CLI (its extra variable, true as Ansible reads booleans)."""
    from ansible.module_utils.parsing.convert_bool import boolean

    return boolean((task_vars or {}).get(CLI_VAR, False), strict=False)


def fill(template: str, inventory: str, *, cli: bool = False) -> str:
    """TEMPLATE with each {PLAYBOOK} (of PLAYBOOKS) replaced by its command and {inventory} by INVENTORY."""
    for playbook in PLAYBOOKS:
        template = template.replace("{" + playbook + "}", run_command(playbook, inventory, cli=cli))
    return template.replace("{inventory}", shlex.quote(str(inventory)))
