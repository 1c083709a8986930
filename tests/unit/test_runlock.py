"""plugin_utils.runlock and plugin_utils.outputs: one run at a time per output folder, and outputs
published a whole set at a time."""

from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import outputs, runlock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.runlock import LockBusy, run_lock


def test_a_second_run_waits_then_refuses_naming_the_first(tmp_path):
    with run_lock(tmp_path, "mlx-fleet running hostfile") as first:
        started = time.monotonic()
        with pytest.raises(LockBusy) as refused:
            with run_lock(tmp_path, "mlx-fleet running site", wait=0.5):
                pytest.fail("two runs held the lock")
        assert time.monotonic() - started >= 0.5
    line = str(refused.value)
    assert "\n" not in line
    assert re.fullmatch(rf"{tmp_path} is in use by mlx-fleet running hostfile \(pid {os.getpid()}, started "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\); waited 0.5 s: let that run finish \(or stop it\) "
                        "and run again", line), line
    assert first["pid"] == os.getpid()


def test_a_waiting_run_goes_ahead_when_the_first_ends(tmp_path):
    held = threading.Event()

    def first():
        with run_lock(tmp_path, "first"):
            held.set()
            time.sleep(0.4)

    thread = threading.Thread(target=first)
    thread.start()
    held.wait()
    with run_lock(tmp_path, "second", wait=10) as second:
        assert second["what"] == "second"
    thread.join()


def test_the_plugins_of_the_run_holding_the_lock_go_ahead(tmp_path, monkeypatch):
    with run_lock(tmp_path, "mlx-fleet running hostfile", token="t0ken"):
        monkeypatch.setenv(runlock.TOKEN_ENV, "t0ken")
        with run_lock(tmp_path, "fabric task", wait=0) as holder:
            assert holder["what"] == "mlx-fleet running hostfile"
        monkeypatch.setenv(runlock.TOKEN_ENV, "another")
        with pytest.raises(LockBusy):
            with run_lock(tmp_path, "fabric task", wait=0):
                pass


def test_the_wait_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(runlock.WAIT_ENV, "2.5")
    assert runlock.wait_seconds() == 2.5
    monkeypatch.setenv(runlock.WAIT_ENV, "soon")
    assert runlock.wait_seconds() == runlock.DEFAULT_WAIT


# --- outputs --------------------------------------------------------------------------------------


def publish(directory, **files):
    with outputs.staged(directory) as stage:
        for name, text in files.items():
            if text is None:
                (stage / name).unlink()
            else:
                (stage / name).write_text(text)


def test_a_set_is_published_at_once_and_readable_by_its_names(tmp_path):
    publish(tmp_path, **{"hostfile.json": "h1", "fabric-addresses.json": "a1"})
    publish(tmp_path, **{"rdma-ledger.json": "l1"})
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if not p.name.startswith(".")} == {
        "hostfile.json": "h1", "fabric-addresses.json": "a1", "rdma-ledger.json": "l1"}
    assert all((tmp_path / n).is_symlink() for n in ("hostfile.json", "rdma-ledger.json"))


def test_a_failed_write_publishes_nothing(tmp_path):
    publish(tmp_path, **{"hostfile.json": "good", "fabric-addresses.json": "good"})
    with pytest.raises(RuntimeError):
        with outputs.staged(tmp_path) as stage:
            (stage / "fabric-addresses.json").write_text("half")
            raise RuntimeError("killed between the two files")
    assert (tmp_path / "hostfile.json").read_text() == (tmp_path / "fabric-addresses.json").read_text() == "good"
    assert not [p for p in (tmp_path / outputs.GENERATIONS).iterdir() if p.name.startswith(".staged-")]


def test_a_removed_file_goes_and_an_unchanged_set_makes_no_generation(tmp_path):
    publish(tmp_path, **{"hostfile.json": "h", "hostfile-ring.json": "r"})
    publish(tmp_path, **{"hostfile-ring.json": None})
    assert not (tmp_path / "hostfile-ring.json").exists() and not (tmp_path / "hostfile-ring.json").is_symlink()
    current = os.readlink(tmp_path / outputs.CURRENT)
    publish(tmp_path)
    assert os.readlink(tmp_path / outputs.CURRENT) == current
    assert len([p for p in (tmp_path / outputs.GENERATIONS).iterdir()]) == outputs.KEPT


def test_a_folder_written_before_generations_is_carried_over(tmp_path):
    (tmp_path / "hostfile.json").write_text("old")
    (tmp_path / "run.lock").write_text("")
    (tmp_path / "runs").mkdir()
    publish(tmp_path, **{"rdma-ledger.json": "new"})
    assert (tmp_path / "hostfile.json").is_symlink() and (tmp_path / "hostfile.json").read_text() == "old"
    assert sorted(p.name for p in (tmp_path / outputs.CURRENT).iterdir()) == ["hostfile.json", "rdma-ledger.json"]


def test_a_reader_never_sees_a_hostfile_and_a_ledger_of_two_writes(tmp_path):
    publish(tmp_path, **{"hostfile.json": "0", "fabric-addresses.json": "0"})
    mixes, reads, done = [], 0, threading.Event()

    def reader():
        nonlocal reads
        while not done.is_set():
            generation = tmp_path / os.readlink(tmp_path / outputs.CURRENT)  # resolved once, like a reader
            try:
                pair = ((generation / "hostfile.json").read_text(), (generation / "fabric-addresses.json").read_text())
            except FileNotFoundError:  # pruned two generations later: read again
                continue
            reads += 1
            if pair[0] != pair[1]:
                mixes.append(pair)

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(1, 150):
        publish(tmp_path, **{"hostfile.json": str(n), "fabric-addresses.json": str(n)})
    done.set()
    thread.join()
    assert reads and not mixes
    assert json.loads((tmp_path / "hostfile.json").read_text()) == 149
