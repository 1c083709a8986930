# -*- coding: utf-8 -*-
"""An exclusive flock taken within a deadline, on a file opened without following a symlink.

The one lock helper of both sides: the controller's run lock (plugin_utils.storage.runlock) and a Mac's install
lock (modules/mlx_env). The kernel drops the lock when its holder exits, so a killed holder never leaves
it taken. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import fcntl
import os
import stat
import time

__metaclass__ = type


class LockTimeout(Exception):
    """The lock was still held elsewhere when the deadline came."""


def open_lock_file(path, mode=0o600):
    """A descriptor of path (created with mode when missing) to lock: never through a symlink (root would
    truncate or create what it points to), and only a plain file; OSError otherwise."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, "not a plain file", path)
    return fd


def lock_within(fd, seconds, poll, go_ahead=None, clock=time):
    """Take an exclusive flock on fd, trying every poll seconds for up to seconds; LockTimeout then.

    go_ahead (optional): asked each time the lock is held elsewhere; when it says True the caller may go ahead
    without the lock (its own run holds it). Returns True when the lock was taken, False on go_ahead.
    clock: what gives monotonic() and sleep() (the caller's, so a test can count a wait without spending it).
    """
    deadline = clock.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if go_ahead is not None and go_ahead():
                return False
            if clock.monotonic() >= deadline:
                raise LockTimeout()
            clock.sleep(poll)
