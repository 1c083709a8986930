# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Update one Mac: start the install (macos_update, the password on its stdin), wait (bounded) for the Mac
to go down and come back, then check it (os_update_facts); record each step (logic: plugin_utils.checks.os_update).

The volume owner's password comes from mlx-fleet os-update over a private socket (plugin_utils.base.secret_socket.
serve_secret), else from the variable mlx_fleet_os_update_password; never a task argument, so it is in no
event, log or record. Only macos_update receives it, as a no_log option."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

from ansible_collections.mlx_fleet.cluster.plugins.action.audit import FACTS as AUDIT_FACTS, controller_state
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import os_update as os_update_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import run_audit
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import StepFailed
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.waits import DAY, HOUR, bounded_seconds

FACTS = "mlx_fleet.cluster.os_update_facts"
NODE_STATE = "mlx_fleet.cluster.node_state"
PASSWORD_VAR = "mlx_fleet_os_update_password"


def _seconds(args: dict, key: str, default: float, most: float) -> float:
    """A wait's bound from the task (plugin_utils.base.waits), refused before any install."""
    try:
        return bounded_seconds(args.get(key) or default, most)
    except ValueError as exc:
        raise AnsibleActionFail(f"{key}: {exc}") from None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("plan", "output_dir", "user", "env_path", "timeout", "poll", "confirm_timeout",
                             "inventory"))

    def _read(self, task_vars, checks):
        res = self._execute_module(module_name=FACTS, module_args={"env_path": self._env, "checks": checks},
                                   task_vars=task_vars)
        if res.get("unreachable"):
            raise AnsibleConnectionFailure(res.get("msg", "unreachable"))
        if res.get("failed"):
            raise AnsibleActionFail(res.get("msg", "os_update_facts failed"))
        return res["ansible_facts"]["mlx_fleet_os_update"]

    def _audit(self, task_vars, output_dir, inventory):
        """This Mac's audit (plugin_utils.checks.audit on its own node_state read, as mlx-fleet audit reads it): the
        findings about this Mac alone, [{topic, fact, expected, found, fix}]."""
        task = self._task.copy()
        task.args = {}
        reader = self._shared_loader_obj.action_loader.get(
            NODE_STATE, task=task, connection=self._connection, play_context=self._play_context, loader=self._loader,
            templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        res = reader.run(task_vars=task_vars)
        if res.get("unreachable"):
            raise AnsibleConnectionFailure(res.get("msg", "unreachable"))
        if res.get("failed"):
            raise AnsibleActionFail(res.get("msg", "node_state failed"))
        name, facts = task_vars["inventory_hostname"], res["ansible_facts"]
        declared = facts["mlx_fleet_declared"]
        try:
            controller = controller_state(output_dir, declared["lock_file"])
        except AnsibleActionFail as exc:
            raise AnsibleActionFail(f"the audit cannot read the controller's files: {exc}") from None
        audited = run_audit([name], {name: {k: facts[k] for k in AUDIT_FACTS}}, {name: declared}, controller,
                            inventory=inventory)
        return os_update.own_findings(name, audited.drifted)

    def _ssh_argv(self, name):
        """ssh to this Mac as Ansible reaches it (its user, port, key, host-key checking and arguments)."""
        conn = self._connection
        target = SshTarget(name, self._play_context.remote_addr or conn.get_option("host"),
                           conn.get_option("remote_user") or "admin", conn.get_option("port"),
                           conn.get_option("private_key_file"), bool(conn.get_option("host_key_checking")),
                           tuple(word for option in ("ssh_common_args", "ssh_extra_args")
                                 for word in shlex.split(conn.get_option(option) or "")))
        return target.argv()

    def _wait(self, task_vars, build, old_build, timeout, poll, password):
        """'back', or what went wrong: no-restart, no-return, locked, old-build."""
        deadline, went_down, unlock_tried = time.monotonic() + timeout, False, False
        while time.monotonic() < deadline:
            time.sleep(max(0.0, min(poll, deadline - time.monotonic())))  # never past the deadline
            try:
                self._connection.reset()  # the Mac restarts: never reuse a connection from before
            except Exception:  # noqa: BLE001 - nothing to reset is fine
                pass
            try:
                now = self._read(task_vars, checks=False)
            except AnsibleConnectionFailure as exc:
                if "Permission denied" in str(exc):  # sshd answers but takes no key: the data volume is locked
                    if unlock_tried or not password or not secret_socket.password_methods(str(exc)):
                        return "locked"
                    unlock_tried = True
                    worked, said = secret_socket.unlock_over_ssh(
                        self._ssh_argv(task_vars["inventory_hostname"]), password)
                    self._display.vvv(f"FileVault unlock over SSH: {'done' if worked else 'refused'} ({said})")
                    if not worked:
                        return "locked"
                went_down = True
                continue
            except AnsibleActionFail:
                went_down = True  # up, but not yet able to run the reads
                continue
            if now["build"] == build:
                return "back"
            if went_down and now["build"] == old_build:
                return "old-build"
        return "no-return" if went_down else "no-restart"

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        self._env = args.get("env_path") or "/opt/mlx-fleet/venv"
        output_dir = Path(args["output_dir"])
        timeout = _seconds(args, "timeout", os_update.DEFAULT_TIMEOUT, DAY)
        poll = _seconds(args, "poll", 10, HOUR)
        inventory = args.get("inventory") or "INVENTORY"
        plan = args["plan"]
        name = task_vars["inventory_hostname"]
        mac = os_update_step.OnMac(
            read=lambda checks: self._read(task_vars, checks=checks),
            audit=lambda: self._audit(task_vars, output_dir, inventory),
            install=lambda password: self._execute_module(module_name="mlx_fleet.cluster.macos_update", module_args={
                "label": plan["labels"][name], "build": plan["target"]["build"], "user": args["user"],
                "password": password, "confirm_timeout": int(args.get("confirm_timeout") or 120)},
                task_vars=task_vars),
            wait=lambda build, old_build, password: self._wait(task_vars, build, old_build, timeout, poll, password),
            password=lambda: secret_socket.fetch_secret(os.environ) or task_vars.get(PASSWORD_VAR))
        try:
            result.update(os_update_step.update(name, plan, mac, output_dir=output_dir, timeout=timeout,
                                                inventory=inventory, location=task_vars.get("mlx_fleet_location"),
                                                cli=fixes.uses_cli(task_vars)))
        except StepFailed as exc:
            raise AnsibleActionFail("\n".join(exc.lines)) from None
        return result
