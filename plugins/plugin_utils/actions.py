"""What the collection's controller-side action plugins share: no connection, an argument
spec, and the cluster's hosts with the facts earlier tasks gathered on them."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ClusterAction(ActionBase):
    """Base for action plugins that judge the whole cluster on the controller."""

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGS: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._VALID_ARGS = frozenset(cls.ARGS)

    def arguments(self) -> dict:
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGS)
        return args

    @staticmethod
    def cluster(task_vars: dict, group: str, facts: tuple[str, ...] = ()) -> tuple[list[str], dict]:
        """(host names in inventory order, hostvars); fails naming hosts that lack a needed fact."""
        hostvars = task_vars["hostvars"]
        names = list(task_vars["groups"].get(group, []))
        missing = [n for n in names if not set(facts) <= set(hostvars[n])]
        if missing:
            raise AnsibleActionFail(
                f"no {' or '.join(facts)} facts for {', '.join(missing)}: run "
                f"{' and '.join('mlx_fleet.cluster.' + f.removeprefix('mlx_fleet_') + '_facts' for f in facts)} "
                "on every Mac first (unreachable or failed hosts cannot be judged)")
        return names, hostvars
