"""What the collection's controller-side action plugins share: no connection, an argument
spec, and the cluster's hosts with the facts earlier tasks gathered on them."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# The keys of the results the summary reads, defined beside it (the CLI reads them without ansible's plugins).
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import (  # noqa: F401
    CLUSTER_STEP, INPUT_ERRORS, OTHER_ERRORS)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView, SettingDiffers
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed


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

    def step_run(self, task_vars: dict, output_dir: str) -> Run:
        """How this task runs its controller step: check mode, the run lock's holder, the fixes' form."""
        return Run(Path(output_dir), write=not self._task.check_mode,
                   holder=f"ansible-playbook task '{self._task.get_name()}'",
                   inventory=fixes.inventory_named(task_vars), cli=fixes.uses_cli(task_vars))

    def stepped(self, result: dict, task_vars: dict, step, *step_args, settings: dict | tuple[str, ...] = (),
                show: bool = False) -> dict:
        """RESULT updated with STEP(view, run, *STEP_ARGS): the view of the arguments' group (with SETTINGS) and the
        run of their output_dir; SHOW: the step's msg printed for a person, at every verbosity."""
        args = self.arguments()
        view = self.view(task_vars, args["group"], settings)
        run = self.step_run(task_vars, args["output_dir"])
        with self.translated(run, result):
            result.update(step(view, run, *step_args))
        if show:
            self._display.display(result["msg"])
        return result

    @contextmanager
    def translated(self, run: Run, result: dict):
        """Runs the step's block: its warnings shown, its StepFailed as Ansible's failure (bad input marked), a
        failure's result over the action's own (RESULT: its cluster_step mark)."""
        try:
            yield
        except StepFailed as exc:
            failed = None if exc.result is None else {**result, **exc.result}
            if exc.bad_input:
                raise refusal(exc.lines, result=failed) from None
            raise AnsibleActionFail("\n".join(exc.lines), result=failed) from None
        finally:
            for warning in run.shown:
                self._display.warning(warning)

    @staticmethod
    def view(task_vars: dict, group: str, settings: dict | tuple[str, ...] = ()) -> ClusterView:
        """The cluster's typed view with the cluster-wide SETTINGS the step reads; refuses one that differs
        between hosts (bad input)."""
        try:
            return ClusterView.of(task_vars, group, settings)
        except SettingDiffers as exc:
            raise refusal([str(exc)]) from None

    @staticmethod
    def require(view: ClusterView, facts: tuple[str, ...]) -> ClusterView:
        """The view, when every host has FACTS; else fails naming those that lack them."""
        missing = view.missing(facts)
        if missing and view.dropped(facts) == missing:
            raise AnsibleActionFail(f"{', '.join(missing)} failed or did not answer earlier in this run, and this step "
                                    "needs every Mac: it changed nothing; fix that and run again")
        if missing:
            raise AnsibleActionFail(
                f"no {' or '.join(facts)} facts for {', '.join(missing)}: run "
                f"{' and '.join('mlx_fleet.cluster.' + f.removeprefix('mlx_fleet_') + '_facts' for f in facts)} "
                "on every Mac first (unreachable or failed hosts cannot be judged)")
        return view
