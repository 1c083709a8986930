"""A run followed through ansible-runner's event stream: what it did, per Mac, as a report."""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import (
    ARGUMENT_CHECK,
    CLUSTER_STEP,
    RunOutcome,
    first_line,
)

from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE

if TYPE_CHECKING:
    from mlx_fleet.runner.progress import Progress


@dataclass
class RunReport(RunOutcome):
    """What a run did, from its events (plugin_utils.render.summary.RunOutcome), and what the CLI adds to it."""

    playbook: str = ""
    in_flight: set[str] = field(default_factory=set)  # Macs with a task started and not yet done
    artifacts: Path | None = None
    seconds: float = 0.0
    diff: bool = False  # --diff: each change's differences are printed as they come

    @property
    def exit_status(self) -> int:
        if self.input_errors:
            return EXIT_BAD_INPUT
        if self.unreachable:
            return EXIT_UNREACHABLE
        if not self.clean:
            return EXIT_ATTENTION
        return EXIT_OK


def render_diff(host: str, task: str, res: dict) -> str:
    """A changed result's differences as ansible-playbook --diff prints them, under the Mac and the step
    (a loop's items each under their label); "" when there are none."""
    from ansible.plugins.callback import CallbackBase

    items = res.get("results") if isinstance(res.get("results"), list) else [res]
    out = []
    for item in items:
        if not (isinstance(item, dict) and item.get("diff") and item.get("changed")):
            continue
        text = CallbackBase()._get_diff(copy.deepcopy(item["diff"]))  # it serializes mappings in place
        if text:
            label = item.get("_ansible_item_label", item.get("item")) if item is not res else None
            out.append(f"{host}: {task}" + (f" ({label})" if label is not None else "") + "\n" + text)
    return "".join(out)


class EventHandler:
    """ansible-runner's event handler: fills the report and drives the progress line."""

    def __init__(self, report: RunReport, progress: Progress | None, diff_stream=None):
        self.report = report
        self.progress = progress
        self.diff_stream = diff_stream or sys.stdout  # where --diff prints, as ansible-playbook does

    def __call__(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        action = data.get("task_action", "")
        progress = self.progress
        if kind == "runner_on_start":
            self.report.in_flight.add(host)
        elif kind.startswith("runner_on_"):
            self.report.in_flight.discard(host)
        if kind == "playbook_on_task_start" and progress:
            progress.task_start(None if action == ARGUMENT_CHECK else data.get("task", "") or action)
        elif kind == "runner_on_start" and progress:
            progress.host_start(host)
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            res = data.get("res", {}) or {}
            failed = kind == "runner_on_failed" and not data.get("ignore_errors")
            if progress:
                progress.host_done(host, failed or kind == "runner_on_unreachable", bool(res.get(CLUSTER_STEP)))
            self.report.record(kind, host, action, data.get("task", ""), res, failed)
            if kind == "runner_on_ok" and self.report.diff:
                self._diff(render_diff(host, data.get("task", "") or action, res))
        elif kind == "warning":
            self.report.warn(first_line(data.get("warning") or event.get("stdout")))
        return True  # keep every event in the artifacts

    def _diff(self, text: str) -> None:
        if not text:
            return
        if self.progress:
            self.progress.aside(text, self.diff_stream)
        else:
            self.diff_stream.write(text)
            self.diff_stream.flush()
