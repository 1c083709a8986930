"""Stop a playbook run when the CLI is interrupted: Ctrl-C, SIGTERM, SIGHUP (a closed terminal).

ansible-runner gives ansible-playbook a pty of its own, so it sits in its own session: a terminal's
Ctrl-C reaches only the CLI. ansible-playbook's workers each call setsid too, so killing its process
group (what ansible-runner's own cancel does) leaves them running with no parent, one still changing
a Mac. So the CLI sends SIGINT to ansible-playbook, which passes it on to its workers and stops; after
GRACE seconds it kills every process group of the tree it saw, the workers' included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE = 5.0  # seconds ansible-playbook gets to stop its workers before the tree is killed
POLL = 0.1


def processes() -> dict[int, tuple[int, int]] | None:
    """pid -> (parent pid, process group) of every live process (not zombies), from ps; None without ps."""
    try:
        with subprocess.Popen(["ps", "-A", "-o", "pid=,ppid=,pgid=,stat="], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True) as ps:
            out, _ = ps.communicate(timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    table = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0].isdigit() and int(fields[0]) != ps.pid and not fields[3].startswith("Z"):
            table[int(fields[0])] = (int(fields[1]), int(fields[2]))
    return table


def descendants(root: int, table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> process group of every process below root (root excluded)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found and pid != root:
            found[pid] = table[pid][1]
            todo += children.get(pid, [])
    return found


class Stopper:
    """Catches SIGINT, SIGTERM and SIGHUP while a playbook runs, and stops the playbook's process tree.

    ``cancel`` is ansible-runner's cancel_callback (asked between reads of the playbook's output);
    ``stop`` is called once the run returned or raised, and leaves no process of the tree behind."""

    def __init__(self, grace: float = GRACE, on_signal: Callable[[], None] | None = None):
        self.grace = grace
        self.on_signal = on_signal
        self.signal: int | None = None
        self.deadline = 0.0
        self.seen: dict[int, int] = {}  # pid -> process group, of every process of the tree seen
        self.signalled: set[int] = set()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Stopper:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handler(self, signum, frame) -> None:
        if self.signal is None:
            self.signal = signum
            self.deadline = time.monotonic() + self.grace
            if self.on_signal:
                self.on_signal()
        self._interrupt_children()

    def _look(self) -> dict[int, tuple[int, int]]:
        table = processes() or {}
        self.seen.update(descendants(os.getpid(), table))
        return table

    def _interrupt_children(self) -> None:
        """SIGINT, once, to each direct child (ansible-playbook), as a terminal's Ctrl-C would."""
        table = self._look()
        for pid, (ppid, _) in table.items():
            if ppid == os.getpid() and pid not in self.signalled:
                self.signalled.add(pid)
                try:
                    os.kill(pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

    def cancel(self) -> bool:
        """ansible-runner's cancel_callback: True once the tree had its grace time and was killed."""
        if self.signal is None:
            return False
        self._interrupt_children()  # a playbook started after the signal
        if time.monotonic() < self.deadline:
            return False  # ansible-playbook is stopping its workers: keep reading its output meanwhile
        self._kill_left()
        return True

    def stop(self) -> None:
        """Leave no process of the tree: interrupt what runs, wait out the grace time, kill the rest."""
        if self.signal is None:
            self.deadline = time.monotonic() + self.grace
        self._interrupt_children()
        while time.monotonic() < self.deadline:
            table = self._look()
            if not any(pid in table for pid in self.seen):
                return
            time.sleep(POLL)
        self._kill_left()

    def _kill_left(self) -> None:
        table = self._look()
        left = {pid: group for pid, group in self.seen.items() if pid in table}
        own = os.getpgrp()
        for group in set(left.values()) - {own}:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def raise_keyboard_interrupt(signum, frame) -> None:
    """SIGTERM and SIGHUP outside a playbook run: unwind as Ctrl-C does, so temporary folders and the
    run lock are cleaned up on the way out."""
    raise KeyboardInterrupt
