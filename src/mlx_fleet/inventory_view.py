# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""The inventory as Ansible reads it, for the controller's readers outside a play.

The CLI's steps that run before or beside a playbook (``mlx-fleet lock``, ``verify``, ``onboard``'s first
contact, the sim's ``--topology``) need what a play would see: the hosts of a group, a host's variables
(host and group vars, magic variables such as ``inventory_dir``), the roles' defaults under them, templated.
In a play that is Ansible's work (the node_state action templates with the play's templar); here it is
this module's, and the only place outside a play that uses ansible-core's InventoryManager,
VariableManager and Templar.

Why in-process rather than ``ansible-inventory --list``, the public interface: that prints host and group
variables untemplated, without the magic variables (``inventory_dir``, which the output folder and the lock
file's defaults are made of), cannot say what a host not yet in the inventory would get (onboard asks exactly
that), and costs a Python start of its own on every command. ansible-core has no public Python API for
inventories, so the private classes stay behind this one module: an ansible-core release that moves them
breaks one file, which the unit tests read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import ROLES
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.host import resolver, trusted


class InventoryViewError(ValueError):
    """The inventory cannot be read or templated; the message is one line for the user."""


class InventoryView:
    """One or more inventory sources (files or folders), read once."""

    def __init__(self, sources: list[str] | tuple[str, ...]):
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        for source in sources:
            if not Path(source).exists():
                raise InventoryViewError(f"inventory {source} does not exist: give the inventory file or folder with -i")
        self.sources = [str(Path(s).resolve()) for s in sources]
        self._loader = DataLoader()
        self._inventory = InventoryManager(loader=self._loader, sources=self.sources)
        self._variables = VariableManager(loader=self._loader, inventory=self._inventory)

    def has_group(self, group: str = CLUSTER_GROUP) -> bool:
        return group in self._inventory.groups

    def hosts(self, group: str = CLUSTER_GROUP) -> list[str]:
        """The group's hosts in inventory order (plain strings: Ansible's are tagged, which YAML cannot write)."""
        return [str(h.name) for h in self._inventory.get_hosts(group)]

    def own_vars(self, host: str) -> dict | None:
        """The variables written on the host's own entry; None when the inventory does not list it."""
        found = self._inventory.get_host(host)
        return dict(found.vars) if found is not None else None

    def variables(self, host: str, *, group: str = CLUSTER_GROUP) -> dict:
        """Every variable a play gives HOST (untemplated). A host the inventory does not list yet gets what it
        would get as a member of GROUP (added in memory for the question only)."""
        from ansible.inventory.host import Host

        found = self._inventory.get_host(host)
        if found is None:
            if not self.has_group(group):
                raise InventoryViewError(f"the inventory has no group {group}: list the cluster's Macs under it")
            found, members = Host(host), self._inventory.groups[group]
            members.add_host(found)
            try:
                return self._variables.get_vars(host=found, include_hostvars=False)
            finally:
                members.remove_host(found)
        return self._variables.get_vars(host=found)

    def template(self, value, variables: dict, role: str = ""):
        """VALUE templated with VARIABLES as Ansible templates it (in ROLE when it is one of a role's values)."""
        from ansible.errors import AnsibleError
        from ansible.template import Templar

        if role:
            variables = dict(variables, role_path=str(ROLES / role))
        try:
            return Templar(loader=self._loader, variables=variables).template(value)
        except AnsibleError as exc:
            raise InventoryViewError(f"inventory: {exc.message}") from None

    def values(self, host: str, *, group: str = CLUSTER_GROUP) -> Callable:
        """get(name, default=None): HOST's value of NAME as a play running the roles sees it (the inventory's
        value over the role's default, role vars over both), templated."""
        return resolver(self.variables(host, group=group), self.template, trusted)
