"""mlx_fleet.cluster.hostfiles: main() run as Ansible runs it, on a folder standing in for /opt/mlx-fleet."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.modules import hostfiles

JACCL = json.dumps({"backend": "jaccl", "envs": [], "hosts": [{"ssh": "a", "ips": [], "rdma": [None, "rdma_en3"]},
                                                              {"ssh": "b", "ips": [], "rdma": ["rdma_en3", None]}]},
                   indent=4)
RING = json.dumps({"backend": "ring", "envs": [], "hosts": [{"ssh": "a", "ips": ["192.168.0.1"], "rdma": []},
                                                            {"ssh": "b", "ips": ["192.168.0.2"], "rdma": []}]},
                  indent=4)


@pytest.fixture
def run(run_module):
    def run(folder, check=False, diff=False, **args) -> dict:
        return run_module(hostfiles.main, dict(args, path=str(folder), _ansible_check_mode=check, _ansible_diff=diff))

    return run


def contents(folder) -> dict:
    return {name: (folder / name).read_text() for name in sorted(os.listdir(folder))}


def test_writes_both_creating_the_folder_then_changes_nothing(run, tmp_path):
    folder = tmp_path / "opt" / "mlx-fleet"
    result = run(folder, hostfile=JACCL, ring_hostfile=RING)
    assert result["changed"] and result["files"] == {"hostfile-ring.json": "created", "hostfile.json": "created"}
    assert contents(folder) == {"hostfile-ring.json": RING, "hostfile.json": JACCL}  # byte for byte, no temporaries
    assert oct(folder.stat().st_mode & 0o777) == "0o755"
    assert {oct((folder / n).stat().st_mode & 0o777) for n in os.listdir(folder)} == {"0o644"}
    stamps = {n: (folder / n).stat().st_mtime_ns for n in os.listdir(folder)}
    again = run(folder, hostfile=JACCL, ring_hostfile=RING)
    assert not again["changed"] and set(again["files"].values()) == {"unchanged"}
    assert {n: (folder / n).stat().st_mtime_ns for n in os.listdir(folder)} == stamps


def test_a_changed_hostfile_is_replaced_and_a_stale_ring_hostfile_removed(run, tmp_path):
    run(tmp_path, hostfile=JACCL, ring_hostfile=RING)
    mesh_only = JACCL.replace("rdma_en3", "rdma_en4")
    result = run(tmp_path, hostfile=mesh_only, diff=True)
    assert result["changed"] and result["files"] == {"hostfile-ring.json": "removed", "hostfile.json": "updated"}
    assert contents(tmp_path) == {"hostfile.json": mesh_only}
    assert [(d["before_header"], d["before"], d["after"]) for d in result["diff"]] == [
        (str(tmp_path / "hostfile-ring.json"), RING, ""), (str(tmp_path / "hostfile.json"), JACCL, mesh_only)]
    assert run(tmp_path, hostfile=mesh_only)["files"] == {"hostfile-ring.json": "absent", "hostfile.json": "unchanged"}


def test_check_mode_reports_and_writes_nothing(run, tmp_path):
    folder = tmp_path / "new"
    result = run(folder, check=True, diff=True, hostfile=JACCL, ring_hostfile=RING)
    assert result["changed"] and [d["after"] for d in result["diff"]] == [RING, JACCL]
    assert not folder.exists()


def test_not_a_hostfile_is_refused_before_anything_is_written(run, tmp_path):
    result = run(tmp_path, hostfile=JACCL, ring_hostfile="[1, 2]")
    assert result["failed"] and result["msg"].startswith("hostfile-ring.json: ") and "JSON" in result["msg"].split()
    assert os.listdir(tmp_path) == []


def test_an_unwritable_folder_is_one_line_naming_it(run, tmp_path):
    (tmp_path / "file").write_text("")
    result = run(tmp_path / "file" / "sub", hostfile=JACCL)
    assert result["failed"] and result["msg"].split(": ")[0] == str(tmp_path / "file" / "sub")
    assert "\n" not in result["msg"]


def test_absent_removes_both_and_then_changes_nothing(run, tmp_path):
    run(tmp_path, hostfile=JACCL, ring_hostfile=RING)
    checked = run(tmp_path, check=True, state="absent")
    assert checked["changed"] and contents(tmp_path) == {"hostfile-ring.json": RING, "hostfile.json": JACCL}
    result = run(tmp_path, diff=True, state="absent")
    assert result["changed"] and result["files"] == {"hostfile-ring.json": "removed", "hostfile.json": "removed"}
    assert contents(tmp_path) == {} and [d["after"] for d in result["diff"]] == ["", ""]
    again = run(tmp_path, state="absent")
    assert not again["changed"] and set(again["files"].values()) == {"absent"}
    assert not run(tmp_path / "never-made", state="absent")["changed"] and not (tmp_path / "never-made").exists()


HOLD = "held: os-update in progress (1 of 4 Macs on 25F84, macOS 26.5.2); run mlx-fleet os-update -i INV to finish"


def test_held_marks_the_folder_and_leaves_the_hostfiles_then_a_release_writes_them(run, tmp_path):
    run(tmp_path, hostfile=JACCL)
    held = run(tmp_path, hostfile=RING, ring_hostfile=RING, held=HOLD)  # the push while held: only the mark
    assert held["changed"] and held["files"] == {"hostfile.held": "created"}
    assert contents(tmp_path) == {"hostfile.held": HOLD + "\n", "hostfile.json": JACCL}
    assert not run(tmp_path, hostfile=RING, held=HOLD)["changed"]
    released = run(tmp_path, hostfile=RING, held="")
    assert released["changed"] and released["files"] == {
        "hostfile-ring.json": "absent", "hostfile.json": "updated", "hostfile.held": "removed"}
    assert contents(tmp_path) == {"hostfile.json": RING}


def test_the_hold_alone_makes_the_folder_and_is_released_alone(run, tmp_path):
    folder = tmp_path / "never-converged"
    marked = run(folder, held=HOLD)
    assert marked["changed"] and contents(folder) == {"hostfile.held": HOLD + "\n"}
    assert oct((folder / "hostfile.held").stat().st_mode & 0o777) == "0o644"
    released = run(folder, held="")
    assert released["changed"] and released["files"] == {"hostfile.held": "removed"} and contents(folder) == {}
    assert not run(folder, held="")["changed"]
    assert run(tmp_path / "other")["failed"]  # neither hostfiles nor a hold: nothing to do is bad input


def test_root_follows_no_link_planted_at_a_hostfile_once_it_is_in_place(run, tmp_path, monkeypatch):
    victim = tmp_path / "secret"  # any file on the Mac, private to its owner
    victim.write_text("key")
    victim.chmod(0o600)
    folder = tmp_path / "opt"
    real_rename = os.rename

    def rename(src, dst, *args, **kwargs):  # another process replaces the new file by a link at once
        real_rename(src, dst, *args, **kwargs)
        if os.path.basename(os.fsdecode(dst)) == "hostfile.json":
            os.unlink(dst)
            os.symlink(victim, dst)

    monkeypatch.setattr(os, "rename", rename)
    assert run(folder, hostfile=JACCL)["files"] == {"hostfile-ring.json": "absent", "hostfile.json": "created"}
    assert victim.read_text() == "key" and victim.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(folder)) == ["hostfile.json"]  # no temporary left behind
