"""What the collection's controller-side action plugins share: no connection, an argument
spec, and the cluster's hosts with the facts earlier tasks gathered on them."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# The keys of the results the summary reads, defined beside it (the CLI reads them without ansible's plugins).
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.summary import (  # noqa: F401
    CLUSTER_STEP, INPUT_ERRORS, OTHER_ERRORS)


def refusal(lines: list[str], *, bad_input: list[str] | None = None, result: dict | None = None) -> AnsibleActionFail:
    """A check's failure, one line per problem; `bad_input`: the lines that are bad input (all when None)."""
    marked = [i for i, line in enumerate(lines) if bad_input is None or line in bad_input]
    return AnsibleActionFail("\n".join(lines), result={
        **(result or {}), INPUT_ERRORS: [lines[i] for i in marked],
        OTHER_ERRORS: [line for i, line in enumerate(lines) if i not in marked]})


class ClusterAction(ActionBase):
    """Base for action plugins that judge the whole cluster on the controller."""

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGS: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._VALID_ARGS = frozenset(cls.ARGS)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if self._task.run_once:
            result[CLUSTER_STEP] = True
        return result

    def arguments(self) -> dict:
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGS)
        return args

    @staticmethod
    def cluster(task_vars: dict, group: str, facts: tuple[str, ...] = ()) -> tuple[list[str], dict]:
        """(host names in inventory order, hostvars); fails naming hosts that lack a needed fact."""
        hostvars = task_vars["hostvars"]
        names = list(task_vars["groups"].get(group, []))
        missing = [n for n in names if not set(facts) <= set(hostvars[n])]
        if missing and ClusterAction.dropped(task_vars, group, facts) == missing:
            raise AnsibleActionFail(f"{', '.join(missing)} failed or did not answer earlier in this run, and this step "
                                    "needs every Mac: it changed nothing; fix that and run again")
        if missing:
            raise AnsibleActionFail(
                f"no {' or '.join(facts)} facts for {', '.join(missing)}: run "
                f"{' and '.join('mlx_fleet.cluster.' + f.removeprefix('mlx_fleet_') + '_facts' for f in facts)} "
                "on every Mac first (unreachable or failed hosts cannot be judged)")
        return names, hostvars

    @staticmethod
    def dropped(task_vars: dict, group: str, facts: tuple[str, ...]) -> list[str]:
        """The cluster's hosts that lack the facts because they failed or did not answer earlier in this
        run (Ansible has named them, and they are gone from the play)."""
        hostvars, active = task_vars["hostvars"], task_vars.get("ansible_play_hosts")
        return [n for n in task_vars["groups"].get(group, [])
                if active is not None and n not in active and not set(facts) <= set(hostvars[n])]
