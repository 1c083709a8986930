# Test-only callback: records every task's per-host results and the stats as JSON in the
# file named by $MLX_FLEET_RECORD (ansible-core ships no JSON stdout callback).
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: record_json
type: aggregate
short_description: record results as JSON for tests
description: Writes plays, tasks, per-host results and stats to $MLX_FLEET_RECORD.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record_json"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.tasks = []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.tasks.append({"task": {"name": task.get_name()}, "hosts": {}})

    def _record(self, result, **extra):
        if self.tasks:
            self.tasks[-1]["hosts"][result._host.get_name()] = dict(result._result, **extra)

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed)
        out = {"plays": [{"tasks": self.tasks}],
               "stats": {h: stats.summarize(h) for h in hosts}}
        with open(os.environ["MLX_FLEET_RECORD"], "w") as handle:
            json.dump(out, handle, default=str)
