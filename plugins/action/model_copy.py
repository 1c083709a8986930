# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Controller side of model_copy: the Mac's part of the sync plan as the module's arguments, for the Mac fed by
the controller a one-shot listener here while the module runs, and for the Mac that fetches Hub entries
(mlx_fleet_models_source) this controller's Hub and the user's token, as a no_log option (logic:
plugin_utils.steps.models, plugin_utils.models.sync_sources)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, model_stream
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import sync_plan
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import ModelsLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.sync_sources import (
    address_towards, first_copy_listener, hub_access)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("plan", "token", "hf_cache", "models_dir", "timeout", "progress_port", "env_python"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec={
            "plan": {"type": "dict", "required": True},
            "token": {"type": "str", "required": True, "no_log": True},
            "hf_cache": {"type": "path", "default": defaults.MODELS_HF_CACHE},
            "models_dir": {"type": "path", "default": defaults.MODELS_DIR},
            "timeout": {"type": "int", "default": 3600},
            "progress_port": {"type": "int", "default": 0},
            "env_python": {"type": "str", "default": ""}})
        if models_step.nothing_to_do(args["plan"], task_vars["inventory_hostname"]):
            # Its read showed every file verified: the same facts as the module's, and no connection.
            result.update(changed=False, ansible_facts={"mlx_fleet_model_copy": model_stream.nothing_copied()})
            return result
        module_args = dict(models_step.copy_arguments(args["plan"], task_vars["inventory_hostname"]),
                           token=args["token"], hf_cache=args["hf_cache"], models_dir=args["models_dir"],
                           timeout=args["timeout"])
        mac = task_vars.get("ansible_host") or task_vars["inventory_hostname"]
        if args["progress_port"] and not self._task.check_mode:  # a live line on the controller (the CLI's)
            module_args["progress"] = {"address": address_towards(mac), "port": args["progress_port"],
                                       "name": task_vars["inventory_hostname"]}
        if models_step.fetches_from_hub(module_args) and not self._task.check_mode:
            try:
                module_args["hub"], module_args["hub_token"] = hub_access(args["env_python"])
            except ModelsLockError as exc:
                result.update(failed=True, msg=str(exc))
                return result
        fed = models_step.from_controller(module_args)
        if not fed or self._task.check_mode:
            result.update(self._execute_module(module_name="mlx_fleet.cluster.model_copy", module_args=module_args,
                                               task_vars=task_vars))
            return result
        with first_copy_listener(mac, args["plan"]["folders"], fed, args["token"], args["timeout"]) as where:
            for sender in module_args["receive"]:
                if sender["sender"] == sync_plan.CONTROLLER:
                    sender["address"], sender["port"] = where
            result.update(self._execute_module(module_name="mlx_fleet.cluster.model_copy", module_args=module_args,
                                               task_vars=task_vars))
        return result
