# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""The end-of-run summary of `mlx-fleet`, for plain ansible-playbook and AWX (logic: plugin_utils.render.summary)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: summary
type: aggregate
short_description: End a run with the summary a person acts on, as mlx-fleet prints it
description:
  - >-
    After the recap, prints what failed and where, what a person must do at the rack (the Macs that need
    the Recovery step and the checklist's path), the backend and why, the hostfiles and the picture, the
    warnings and which Macs changed; the lines C(mlx-fleet converge) ends with, from the same task results.
  - >-
    Needs enabling, as every collection callback, with C(callbacks_enabled = mlx_fleet.cluster.summary) in
    the [defaults] section of ansible.cfg (the repository's ansible.cfg and the one the mlx-fleet CLI runs
    with do), or C(ANSIBLE_CALLBACKS_ENABLED=mlx_fleet.cluster.summary) in the environment (for AWX, in the
    job template's or the execution environment's settings). It prints beside whatever stdout callback is set.
author: mlx-fleet contributors (!UNKNOWN)
requirements:
  - enable in ansible.cfg (callbacks_enabled) or with ANSIBLE_CALLBACKS_ENABLED
"""

from ansible import context
from ansible.plugins.callback import CallbackBase

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import RunOutcome


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mlx_fleet.cluster.summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcome = RunOutcome()

    def v2_playbook_on_start(self, playbook):
        self.outcome = RunOutcome(check=bool((context.CLIARGS or {}).get("check")))

    def _record(self, kind: str, result, failed: bool = False) -> None:
        task = result._task
        # The task's own name, without its role's: as ansible-runner's events give it to the CLI.
        self.outcome.record(kind, result._host.get_name(), task.action or "", task.name or task.action or "",
                            result._result, failed)

    def v2_runner_on_ok(self, result):
        self._record("runner_on_ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("runner_on_failed", result, failed=not ignore_errors)

    def v2_runner_on_unreachable(self, result):
        self._record("runner_on_unreachable", result)

    def v2_playbook_on_stats(self, stats):
        lines = self.outcome.outcome_lines()
        if lines:
            self._display.banner("MLX FLEET SUMMARY")
            for line in terminal_text(lines).split("\n"):  # Mac-reported values escaped, as the CLI prints them
                self._display.display(line)
