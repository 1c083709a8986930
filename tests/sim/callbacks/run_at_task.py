# Test-only callback: when the first task whose name starts with $MLX_FLEET_AT_TASK starts, runs the
# command line $MLX_FLEET_AT_TASK_RUN once, before any host runs that task, so a test can change the
# world at an exact point of a run (a cable pulled between the fabric plan and the network step).
from __future__ import annotations

import os
import shlex
import subprocess

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: run_at_task
type: aggregate
short_description: run a command when a given task starts, for tests
description: Runs $MLX_FLEET_AT_TASK_RUN once when a task named $MLX_FLEET_AT_TASK... starts.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "run_at_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.done = False

    def v2_playbook_on_task_start(self, task, is_conditional):
        # task.name, not get_name(): a role's task is shown as "role : name".
        if self.done or not (task.name or "").startswith(os.environ["MLX_FLEET_AT_TASK"]):
            return
        self.done = True
        # The strategy waits for this before it queues the task on any host.
        ran = subprocess.run(shlex.split(os.environ["MLX_FLEET_AT_TASK_RUN"]), capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
        if ran.returncode:
            self._display.error(f"run_at_task: {os.environ['MLX_FLEET_AT_TASK_RUN']} exited {ran.returncode}: "
                                f"{ran.stderr.strip()}")
