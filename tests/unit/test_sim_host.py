"""macsim's host checks that need no cluster: node names the machine already resolves."""

from __future__ import annotations

from mlx_fleet.sim.host import name_warnings


def test_a_name_the_machine_resolves_is_reported_with_its_address():
    warnings = name_warnings(["localhost", "macsim-no-such-name-7f3a"], ssh_configs=[])
    assert len(warnings) == 1 and warnings[0].startswith("localhost already resolves to 127.0.0.1 ")


def test_ssh_config_host_entries_that_match_a_node_name(tmp_path):
    config = tmp_path / "config"
    config.write_text("Host *\n  ServerAliveInterval 30\nHost mini-* !mini-3\n  User me\n"
                      "  host=studio-1 lab\nMatch host mini-2\n  Port 2222\n")
    warnings = name_warnings(["mini-1", "mini-3", "studio-1", "mbp-1"], ssh_configs=[config])
    assert warnings == [
        f"mini-1 matches 'Host mini-*' in {config}: that entry may change how ssh reaches the simulated Mac",
        f"studio-1 matches 'Host studio-1' in {config}: that entry may change how ssh reaches the simulated Mac",
    ]
