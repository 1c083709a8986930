"""The cluster as a controller step sees it, built once per action from Ansible's task variables: the group's
hosts in inventory order, each with its variables and the facts earlier tasks gathered on it, and the
cluster-wide settings, one value for the whole cluster (a setting that differs between hosts is refused)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ansible.errors import AnsibleError

MACOS = "mlx_fleet_macos"
THUNDERBOLT = "mlx_fleet_thunderbolt"


class SettingDiffers(ValueError):
    """A cluster-wide variable whose value is not the same on every host: bad input. ``hosts``: the first host and
    the first whose value differs from it."""

    def __init__(self, key: str, hosts: tuple[str, str], why: str):
        super().__init__(f"{key} differs between {hosts[0]} and {hosts[1]}: {why}")
        self.key, self.hosts = key, hosts


def one_value(key: str, values: Mapping[str, Any], why: str = "it is one for the whole cluster") -> Any:
    """The value every host gives KEY (values: host -> value, in inventory order); SettingDiffers naming the
    first host and the first one that differs from it."""
    first = next(iter(values))
    odd = [host for host, value in values.items() if value != values[first]]
    if odd:
        raise SettingDiffers(key, (first, odd[0]), why)
    return values[first]


@dataclass(frozen=True)
class Host:
    """One host of the cluster: its variables (Ansible's hostvars, templated when read) and facts, each fact
    read once."""

    name: str
    variables: Mapping[str, Any]

    def has(self, facts: tuple[str, ...]) -> bool:
        return all(fact in self.variables for fact in facts)

    def known(self, keys: tuple[str, ...]) -> dict:
        """The variables among KEYS that are set and can be resolved on the controller now (one built from a
        Mac's facts cannot, and is judged where it is used)."""
        known = {}
        for key in keys:
            try:
                if key in self.variables:
                    known[key] = self.variables[key]
            except AnsibleError:
                continue
        return known

    @cached_property
    def macos(self) -> dict:
        """Its mlx_fleet_macos facts ({} when not read)."""
        return self.variables.get(MACOS) or {}

    @cached_property
    def thunderbolt(self) -> dict:
        return self.variables[THUNDERBOLT]

    @cached_property
    def model(self) -> str | None:
        """Its declared mlx_fleet_model, None when the inventory gives none."""
        return self.variables.get("mlx_fleet_model") or None

    @cached_property
    def location(self) -> str | None:
        location = self.variables.get("mlx_fleet_location")
        return str(location) if location else None


@dataclass(frozen=True)
class ClusterView:
    """The group's hosts (inventory order), the hosts still in the play (None: unknown) and the settings read."""

    group: str
    hosts: tuple[Host, ...]
    active: tuple[str, ...] | None
    settings: Mapping[str, Any]

    @classmethod
    def of(cls, task_vars: Mapping, group: str, settings: Mapping[str, Any] | tuple[str, ...] = ()) -> ClusterView:
        """The group's hosts, from an action's task_vars; SETTINGS: the cluster-wide variables the step reads,
        each with its default (a tuple: only those set), judged one value on every host."""
        return cls._of(task_vars, group, task_vars["groups"].get(group, []), settings)

    @classmethod
    def play(cls, task_vars: Mapping) -> ClusterView:
        """Every host of the play (ansible_play_hosts_all), for a step that runs on each Mac."""
        return cls._of(task_vars, "", task_vars["ansible_play_hosts_all"], ())

    @classmethod
    def _of(cls, task_vars: Mapping, group: str, names: list[str], settings) -> ClusterView:
        hostvars = task_vars["hostvars"]
        hosts = tuple(Host(name, hostvars[name]) for name in names)
        active = task_vars.get("ansible_play_hosts")
        defaults = dict(settings) if isinstance(settings, Mapping) else dict.fromkeys(settings, _UNSET)
        resolved = {}
        for key, default in defaults.items():
            value = one_value(key, {h.name: h.variables.get(key, default) for h in hosts}) if hosts else default
            if value is not _UNSET:
                resolved[key] = value
        return cls(group, hosts, None if active is None else tuple(active), resolved)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    @property
    def inventory_file(self) -> str:
        """The first host's inventory_file (where Ansible read it), for the fixes a step names."""
        return (self.hosts[0].variables.get("inventory_file") if self.hosts else None) or "INVENTORY"

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def setting(self, key: str) -> Any:
        """A cluster-wide variable read when the view was built (its default when no host sets it)."""
        return self.settings.get(key)

    def known_settings(self, keys: tuple[str, ...]) -> dict:
        """The cluster-wide variables among KEYS that some host sets and can resolve now, each one value for the
        whole cluster (SettingDiffers when a host differs, or cannot resolve it while another can)."""
        known = {h.name: h.known(keys) for h in self.hosts}
        return {key: one_value(key, {n: values.get(key, _UNSET) for n, values in known.items()})
                for key in keys if any(key in values for values in known.values())}

    def facts(self, fact: str) -> dict[str, Any]:
        """{host: that fact} for every host."""
        return {h.name: h.variables[fact] for h in self.hosts}

    def macos(self) -> dict[str, dict]:
        return {h.name: h.macos for h in self.hosts}

    def thunderbolt(self) -> dict[str, dict]:
        return {h.name: h.thunderbolt for h in self.hosts}

    def models(self) -> dict[str, str]:
        """The declared models, of the hosts that declare one."""
        return {h.name: h.model for h in self.hosts if h.model}

    def locations(self) -> dict[str, str]:
        return {h.name: h.location for h in self.hosts if h.location}

    def missing(self, facts: tuple[str, ...]) -> list[str]:
        """The hosts that lack one of FACTS."""
        return [h.name for h in self.hosts if not h.has(facts)]

    def dropped(self, facts: tuple[str, ...]) -> list[str]:
        """The hosts that lack FACTS because they failed or did not answer earlier in this run (Ansible has
        named them, and they are gone from the play)."""
        return [n for n in self.missing(facts) if self.active is not None and n not in self.active]

    def having(self, facts: tuple[str, ...]) -> ClusterView:
        """The view of its hosts that have FACTS (those read), in inventory order."""
        return ClusterView(self.group, tuple(h for h in self.hosts if h.has(facts)), self.active, self.settings)

    def still_in_play(self) -> ClusterView:
        """The view of its hosts still in the play (none when that is unknown), in inventory order."""
        active = self.active or ()
        return ClusterView(self.group, tuple(h for h in self.hosts if h.name in active), self.active, self.settings)


_UNSET = object()
