"""macsim's cluster folder, which root fills with what every ssh on the machine reads and every simulated Mac
trusts: another account (the sim's student) that made the folder, a parent of it, or a key in it gets a
one-line refusal and nothing written; a folder root made itself is used again, with a key made anew."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from mlx_fleet.sim.host import DROP_IN_DIR, DROP_IN_GLOB, OTHER_UID, drop_in_target
from simlib import mlx_fleet

pytestmark = pytest.mark.sim


@pytest.fixture
def base():
    """A root-owned 0755 folder under /var/tmp (the simulated Macs read the cluster folder)."""
    folder = Path(tempfile.mkdtemp(prefix="mlx-fleet-trust-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    for state in folder.rglob("state.json"):  # a cluster a refusal failed to stop
        mlx_fleet("sim", "down", "--dir", str(state.parent), check=False)
    shutil.rmtree(folder, ignore_errors=True)


def _includes() -> list[str]:
    return [drop_in_target(d) or "" for d in DROP_IN_DIR.glob(DROP_IN_GLOB)]


def _refused(sim_dir: Path | str) -> str:
    result = mlx_fleet("sim", "up", "--dir", str(sim_dir), "--nodes", "1", check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def _key_pair(folder: Path, owner: int) -> str:
    key = folder / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "planted", "-f", str(key)], check=True)
    for path in (key, key.with_suffix(".pub")):
        os.chown(path, owner, owner)
    return key.with_suffix(".pub").read_text().split()[1]


def test_a_cluster_folder_another_account_made_or_sits_under_is_refused_with_nothing_written(base):
    theirs = base / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    theirs.chmod(0o777)
    assert f"uid {OTHER_UID}" in _refused(theirs)
    assert f"uid {OTHER_UID}" in _refused(theirs / "lab")  # a parent of theirs: they could swap the folder
    assert list(theirs.iterdir()) == []
    assert not [target for target in _includes() if target.startswith(str(theirs))]


def test_a_key_another_account_planted_is_refused_and_no_mac_trusts_it(base):
    sim_dir = base / "lab"
    sim_dir.mkdir(mode=0o755)
    _key_pair(sim_dir, OTHER_UID)
    said = _refused(sim_dir)  # the key, and the account that owns it
    assert str(sim_dir / "id_ed25519") in said and f"uid {OTHER_UID}" in said
    assert sorted(p.name for p in sim_dir.iterdir()) == ["id_ed25519", "id_ed25519.pub"]
    assert not [target for target in _includes() if target.startswith(str(sim_dir))]


def test_a_cluster_folder_with_a_space_is_refused_and_no_ssh_config_includes_a_part_of_it(base):
    sim_dir = base / "my lab"
    _refused(sim_dir)
    assert not sim_dir.exists()
    assert not [target for target in _includes() if target.startswith(str(base))]


def test_sim_up_again_in_its_own_folder_works_with_a_new_key_not_the_one_left_there(base):
    sim_dir = base / "lab"
    sim_dir.mkdir(mode=0o755)
    left = _key_pair(sim_dir, 0)  # root's: a failed `down`'s leftover, still not ours to trust
    try:
        mlx_fleet("sim", "up", "--dir", str(sim_dir), "--nodes", "1")
        node = "mini-1"
        trusted = (sim_dir / "nodes" / node / "fs/Users/admin/.ssh/authorized_keys").read_text().split()[1]
        assert trusted == (sim_dir / "id_ed25519.pub").read_text().split()[1] and trusted != left
        assert f"{sim_dir}/ssh_config" in _includes()
        reached = subprocess.run(["ssh", "-F", str(sim_dir / "ssh_config"), "-o", "BatchMode=yes", node, "true"],
                                 capture_output=True, text=True, timeout=60)
        assert reached.returncode == 0, reached.stderr
    finally:
        mlx_fleet("sim", "down", "--dir", str(sim_dir), check=False)
