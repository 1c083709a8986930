"""plugin_utils.declare.cluster_view: the cluster's facts and settings, typed and built once per action."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleError

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import (
    MACOS, THUNDERBOLT, ClusterView, SettingDiffers, one_value)


class Unresolvable(dict):
    """Hostvars whose KEY is set but built from a Mac's facts: reading it fails on the controller."""

    def __init__(self, key, **values):
        super().__init__(values, **{key: None})
        self.key = key

    def __getitem__(self, key):
        if key == self.key:
            raise AnsibleError(f"{key} is undefined")
        return super().__getitem__(key)


def task_vars(**hostvars) -> dict:
    return {"groups": {"mlx_cluster": list(hostvars)}, "ansible_play_hosts": list(hostvars), "hostvars": hostvars}


def test_hosts_keep_the_inventory_order_with_their_typed_facts():
    view = ClusterView.of(task_vars(
        b={MACOS: {"serial_number": "B"}, THUNDERBOLT: {"ports": []}, "mlx_fleet_model": "mini-m4-pro"},
        a={MACOS: {"serial_number": "A"}, THUNDERBOLT: {"ports": []}, "mlx_fleet_location": 3}), "mlx_cluster")
    assert view.names == ["b", "a"]
    assert view.macos() == {"b": {"serial_number": "B"}, "a": {"serial_number": "A"}}
    assert view.models() == {"b": "mini-m4-pro"}
    assert view.locations() == {"a": "3"}
    assert view.host("b").thunderbolt == {"ports": []}


def test_a_setting_is_one_value_for_the_cluster_or_refused():
    same = task_vars(a={"mlx_fleet_backend": "ring"}, b={"mlx_fleet_backend": "ring"})
    assert ClusterView.of(same, "mlx_cluster", {"mlx_fleet_backend": "auto"}).setting("mlx_fleet_backend") == "ring"
    unset = task_vars(a={}, b={})
    assert ClusterView.of(unset, "mlx_cluster", {"mlx_fleet_backend": "auto"}).setting("mlx_fleet_backend") == "auto"
    assert ClusterView.of(unset, "mlx_cluster", ("mlx_fleet_cables",)).settings == {}
    one_set = task_vars(a={"mlx_fleet_backend": "ring"}, b={})
    with pytest.raises(SettingDiffers, match="^mlx_fleet_backend differs between a and b"):
        ClusterView.of(one_set, "mlx_cluster", {"mlx_fleet_backend": "auto"})


def test_one_value_names_the_first_host_and_the_first_that_differs():
    assert one_value("k", {"a": 1, "b": 1}) == 1
    with pytest.raises(SettingDiffers) as differs:
        one_value("k", {"a": 1, "b": 1, "c": 2, "d": 3}, why="one please")
    assert (differs.value.key, differs.value.hosts) == ("k", ("a", "c"))
    assert str(differs.value).endswith(": one please")


def test_known_settings_leave_out_what_no_host_can_resolve_now():
    view = ClusterView.of(task_vars(a=Unresolvable("mlx_fleet_ip_pool", mlx_fleet_envs=["X=1"]),
                                    b=Unresolvable("mlx_fleet_ip_pool", mlx_fleet_envs=["X=1"])), "mlx_cluster")
    assert view.known_settings(("mlx_fleet_ip_pool", "mlx_fleet_envs", "mlx_fleet_cables")) == {
        "mlx_fleet_envs": ["X=1"]}
    assert view.host("a").known(("mlx_fleet_ip_pool", "mlx_fleet_envs")) == {"mlx_fleet_envs": ["X=1"]}


def test_hosts_that_dropped_out_of_the_play_are_told_from_those_never_read():
    tv = task_vars(a={THUNDERBOLT: {}}, b={}, c={})
    tv["ansible_play_hosts"] = ["a", "b"]
    view = ClusterView.of(tv, "mlx_cluster")
    assert view.missing((THUNDERBOLT,)) == ["b", "c"]
    assert view.dropped((THUNDERBOLT,)) == ["c"]
    assert view.having((THUNDERBOLT,)).names == ["a"]
    assert view.still_in_play().names == ["a", "b"]
