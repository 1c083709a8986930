"""module_utils.locks: the one flock with a deadline (the run lock, a Mac's install lock)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.locks import LockTimeout, lock_within, open_lock_file


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


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
        with pytest.raises(LockTimeout):
            lock_within(second, 2, 0.5, clock=clock)
        assert clock.now == 2.0
        assert lock_within(second, 2, 0.5, go_ahead=lambda: True) is False
    finally:
        os.close(first)
    assert lock_within(second, 0, 0.1) is True
    os.close(second)
