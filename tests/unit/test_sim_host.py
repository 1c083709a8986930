"""macsim's host checks that need no cluster: node names the machine already resolves, the cluster
folder, files written as root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlx_fleet.sim import host
from mlx_fleet.sim.host import name_warnings

MLX_FLEET = str(Path(sys.executable).parent / "mlx-fleet")


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


def test_a_cluster_folder_given_as_another_users_symlink_is_refused(tmp_path):
    target = tmp_path / "root-owned"
    target.mkdir(mode=0o755)  # root's, not writable by others: fine on its own
    host.check_cluster_dir(target)
    link = tmp_path / "lab"
    link.symlink_to(target)
    os.lchown(link, 65534, 65534)  # made by another user (the tests run as root)
    with pytest.raises(host.SimError, match=r"is a symlink made by uid 65534"):
        host.check_cluster_dir(link)
    refused = subprocess.run([MLX_FLEET, "sim", "status", "--dir", str(link)], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "symlink made by uid 65534" in refused.stderr
    assert list(target.iterdir()) == []


def test_the_sims_files_are_written_over_a_symlink_never_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    (tmp_path / "inventory.yml").symlink_to(victim)
    host.write_file(tmp_path / "inventory.yml", "all: {}\n", 0o600)
    assert victim.read_text() == "root's file\n"
    written = tmp_path / "inventory.yml"
    assert not written.is_symlink() and written.read_text() == "all: {}\n" and written.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inventory.yml", "victim"]
