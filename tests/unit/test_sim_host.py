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
    [warning] = warnings  # the name, and the address it resolves to already
    assert warning.split()[0] == "localhost" and "127.0.0.1" in warning.split()


def test_ssh_config_host_entries_that_match_a_node_name(tmp_path):
    config = tmp_path / "config"
    config.write_text("Host *\n  ServerAliveInterval 30\nHost mini-* !mini-3\n  User me\n"
                      "  host=studio-1 lab\nMatch host mini-2\n  Port 2222\n")
    warnings = name_warnings(["mini-1", "mini-3", "studio-1", "mbp-1"], ssh_configs=[config])
    # Each: the node, the entry it matches (quoted), and the file.
    assert [(w.split()[0], w.split("'")[1]) for w in warnings] == [("mini-1", "Host mini-*"),
                                                                    ("studio-1", "Host studio-1")]
    assert all(f"{config}:" in w.split() for w in warnings)


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
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and str(link) in refused.stderr
    assert "symlink" in refused.stderr.split() and "uid 65534" in refused.stderr
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


OTHER_UID = host.OTHER_UID  # "another account" (the sim's student); the tests run as root


def _other_owned_folder(path: Path, mode: int = 0o755) -> Path:
    path.mkdir()
    os.chown(path, OTHER_UID, OTHER_UID)
    path.chmod(mode)
    return path


def test_a_cluster_folder_under_a_parent_another_account_owns_is_refused(tmp_path):
    parent = _other_owned_folder(tmp_path / "theirs")
    with pytest.raises(host.SimError, match=rf"{parent} is owned by uid {OTHER_UID}"):
        host.check_cluster_dir(parent / "lab")  # not there yet: they could swap it in once root made it


def test_a_cluster_folder_under_a_folder_anyone_can_write_is_refused_unless_sticky(tmp_path):
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)
    with pytest.raises(host.SimError, match=r"writable by others \(mode 0777\)"):
        host.check_cluster_dir(open_parent / "lab")
    sticky = tmp_path / "shared-tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others cannot rename or remove what root made in it
    host.check_cluster_dir(sticky / "lab")
    (sticky / "lab").mkdir(mode=0o755)
    host.check_cluster_dir(sticky / "lab")


def test_a_root_symlink_on_the_way_to_another_accounts_folder_is_refused(tmp_path):
    theirs = _other_owned_folder(tmp_path / "theirs")
    (tmp_path / "link").symlink_to(theirs)  # root's link, pointing at their folder
    with pytest.raises(host.SimError, match=rf"{theirs} is owned by uid {OTHER_UID}"):
        host.check_cluster_dir(tmp_path / "link" / "lab")


@pytest.mark.parametrize("name", ["my lab", "lab*", 'la"b', "lab%h", "lab$HOME"])
def test_a_cluster_folder_ssh_config_would_split_or_expand_is_refused(tmp_path, name):
    with pytest.raises(host.SimError, match=r"letters, digits and"):
        host.check_cluster_dir(tmp_path / name)


def _sim_up_stopping_before_the_build(monkeypatch, sim_dir: Path, plant=None) -> int:
    """`mlx-fleet sim up --dir SIM_DIR` in this process, up to where the nodes would be built: the registry
    and host resources faked (left as others use them); plant runs between the folder check and `up`."""
    import contextlib

    from mlx_fleet.cli import main
    from mlx_fleet.sim.cluster import Cluster

    def stop(*_args):
        raise host.SimError("stopped before the build")

    monkeypatch.setattr(host, "registry_lock", contextlib.nullcontext)
    monkeypatch.setattr(host, "claim_index", lambda _dir: 249)
    monkeypatch.setattr(host, "acquire_shared_resources", lambda: "password")
    monkeypatch.setattr(host, "remove_stale_drop_ins", lambda: [])
    def warnings(_names):  # runs between the folder check and `up`, as the getent lookups do
        if plant:
            plant()
        return []

    monkeypatch.setattr(host, "name_warnings", warnings)
    monkeypatch.setattr(Cluster, "_build", stop)
    monkeypatch.setattr(Cluster, "down", lambda _self: None)
    return main(["sim", "up", "--dir", str(sim_dir), "--nodes", "1"])


def test_a_cluster_folder_another_account_makes_while_sim_up_runs_is_refused_and_left_alone(tmp_path, monkeypatch, capsys):
    sim_dir = tmp_path / "lab"
    status = _sim_up_stopping_before_the_build(monkeypatch, sim_dir, plant=lambda: _other_owned_folder(sim_dir, 0o777))
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and str(sim_dir) in err and f"uid {OTHER_UID}" in err
    assert list(sim_dir.iterdir()) == []


def test_sim_up_refuses_a_key_another_account_left_in_its_folder_and_writes_nothing(tmp_path, monkeypatch, capsys):
    sim_dir = tmp_path / "lab"
    sim_dir.mkdir(mode=0o755)  # root's, as `sim up` makes it
    key = sim_dir / "id_ed25519"
    key.write_text("their key\n")
    os.chown(key, OTHER_UID, OTHER_UID)
    status = _sim_up_stopping_before_the_build(monkeypatch, sim_dir)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and str(key) in err and f"uid {OTHER_UID}" in err
    assert [p.name for p in sim_dir.iterdir()] == ["id_ed25519"] and key.read_text() == "their key\n"


def test_sim_up_makes_a_missing_cluster_folder_and_its_parents_root_s_0755(tmp_path, monkeypatch, capsys):
    sim_dir = tmp_path / "a" / "lab"
    old = os.umask(0o000)
    try:
        _sim_up_stopping_before_the_build(monkeypatch, sim_dir)
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", sim_dir):
        st = folder.stat()
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)
