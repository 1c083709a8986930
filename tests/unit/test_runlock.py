"""plugin_utils.storage.runlock, module_utils.locks and plugin_utils.storage.outputs: one run at a time per output folder (the lock
helper with a deadline it shares with a Mac's install lock), and outputs published a whole set at a time."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.locks import LockTimeout, lock_within, open_lock_file
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import outputs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder, atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.runlock import LockBusy, run_lock


class FakeClock:
    """runlock's clock: sleeping moves it on, so a wait is counted, not spent."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_second_run_waits_then_refuses_naming_the_first(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(runlock, "time", clock)
    with run_lock(tmp_path, "mlx-fleet running hostfile") as first:
        with pytest.raises(LockBusy) as refused:
            with run_lock(tmp_path, "mlx-fleet running site", wait=0.5):
                pytest.fail("two runs held the lock")
    # It waited its whole bound, and no more than one poll beyond it.
    assert 1000.5 <= clock.now <= 1000.5 + runlock.POLL
    busy = refused.value  # the first run as its lock file names it, and the wait
    assert (busy.holder["pid"], busy.holder["what"], busy.waited) == (os.getpid(), "mlx-fleet running hostfile", 0.5)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", busy.holder["started"])
    line = str(busy)  # one line naming the folder, the holder and its pid
    assert "\n" not in line and line.startswith(f"{tmp_path} ") and all(
        value in line for value in (busy.holder["what"], f"pid {os.getpid()}", busy.holder["started"]))
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


# --- the lock helper (module_utils.locks: the run lock's, and a Mac's install lock's) -----------------


def test_a_lock_file_is_never_opened_through_a_symlink(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep")
    (tmp_path / "run.lock").symlink_to(target)
    with pytest.raises(OSError):
        open_lock_file(tmp_path / "run.lock")
    assert target.read_text() == "keep"


def test_a_lock_file_must_be_a_plain_file(tmp_path):
    os.mkfifo(tmp_path / "run.lock")
    with pytest.raises(OSError):
        open_lock_file(tmp_path / "run.lock")


def test_a_held_lock_times_out_at_its_deadline_or_lets_its_own_run_go_ahead(tmp_path):
    first = open_lock_file(tmp_path / "run.lock")
    second = open_lock_file(tmp_path / "run.lock")
    try:
        assert lock_within(first, 0, 0.1) is True
        clock = FakeClock()
        start = clock.now
        with pytest.raises(LockTimeout):
            lock_within(second, 2, 0.5, clock=clock)
        assert clock.now == start + 2.0
        assert lock_within(second, 2, 0.5, go_ahead=lambda: True) is False
    finally:
        os.close(first)
    assert lock_within(second, 0, 0.1) is True
    os.close(second)


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


def test_a_generation_owns_only_its_own_files_and_later_reports_stay_as_written(tmp_path):
    (tmp_path / "audit.json").write_text("report of before")  # a folder written before generations
    (tmp_path / "run.lock").write_text("")
    (tmp_path / "runs").mkdir()
    publish(tmp_path, **{"hostfile.json": "h1"})
    assert not (tmp_path / "audit.json").is_symlink() and (tmp_path / "audit.json").read_text() == "report of before"
    assert sorted(p.name for p in (tmp_path / outputs.CURRENT).iterdir()) == ["hostfile.json"]
    # Reports written after a generation, over a name it had too, replace its link with a file of their own.
    publish(tmp_path, **{"hostfile.json": "h2", "visit-mini-5.txt": "old sheet"})
    atomic_write_text(tmp_path / "visit-mini-5.txt", "new sheet", mode=0o600)
    atomic_write_text(tmp_path / "audit.json", "report of now", mode=0o600)
    publish(tmp_path, **{"hostfile.json": "h3"})  # the next converge
    for name, text in (("visit-mini-5.txt", "new sheet"), ("audit.json", "report of now")):
        path = tmp_path / name
        assert not path.is_symlink() and path.read_text() == text
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / outputs.CURRENT).iterdir()) == ["hostfile.json"]
    assert (tmp_path / "hostfile.json").read_text() == "h3"


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


# --- the output folder is the user's own --------------------------------------------------------------


def test_a_missing_output_folder_is_made_private(tmp_path):
    with run_lock(tmp_path / "inventory" / ".mlx-fleet", "mlx-fleet running site"):
        pass
    assert stat.S_IMODE((tmp_path / "inventory" / ".mlx-fleet").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "inventory" / ".mlx-fleet" / runlock.LOCK_FILE).stat().st_mode) == 0o600


def test_the_run_lock_is_never_opened_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    theirs = "a file of someone's\n"
    victim.write_text(theirs)
    folder = tmp_path / "out"
    folder.mkdir(mode=0o700)
    (folder / runlock.LOCK_FILE).symlink_to(victim)
    with pytest.raises(UnsafeFolder) as refused:
        with run_lock(folder, "mlx-fleet running site", wait=0):
            pytest.fail("locked through a symlink")
    assert victim.read_text() == theirs
    assert "\n" not in str(refused.value) and str(folder / runlock.LOCK_FILE) in str(refused.value)


@pytest.mark.parametrize("mode, words", [(0o777, "group and others (mode 0777)"), (0o770, "its group (mode 0770)")])
def test_an_output_folder_others_can_write_is_refused_naming_the_fix(tmp_path, mode, words):
    folder = tmp_path / "out"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(UnsafeFolder) as refused:
        with run_lock(folder, "mlx-fleet running site", wait=0):
            pytest.fail("a folder others can write was used")
    said = str(refused.value)  # the folder, who can write it (and its mode), and the command that fixes it
    assert said.startswith(f"{folder} ") and words in said and said.endswith(f"chmod go-w {folder}")
    assert not (folder / runlock.LOCK_FILE).exists()


def test_an_output_folder_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir(mode=0o755)
    os.chown(folder, 4242, 4242)  # the tests run as root (the sim needs it)
    with pytest.raises(UnsafeFolder, match=r"belongs to another user \(uid 4242\)"):
        with run_lock(folder, "mlx-fleet running site", wait=0):
            pytest.fail("another user's folder was used")


def test_a_generations_folder_that_is_a_symlink_is_refused_and_what_it_points_to_is_kept(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "0000000001").mkdir(parents=True)
    (elsewhere / "0000000001" / "keep.txt").write_text("keep")
    (elsewhere / ".staged-x").mkdir()
    folder = tmp_path / "out"
    folder.mkdir(mode=0o700)
    (folder / outputs.GENERATIONS).symlink_to(elsewhere)
    for _ in range(3):
        with pytest.raises(UnsafeFolder, match="is a symlink"):
            publish(folder, **{"hostfile.json": "h"})
    assert (elsewhere / "0000000001" / "keep.txt").read_text() == "keep" and (elsewhere / ".staged-x").is_dir()
