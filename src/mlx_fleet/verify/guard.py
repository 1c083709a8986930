"""`python -m mlx_fleet.verify.guard -- LAUNCHER...`: LAUNCHER (mlx.launch) in this process group, stopped with
the whole group when the controller that started it is gone.

jobs.run starts this in a process group of its own, with a pipe as its stdin that only jobs.run's process
writes to. When that process ends in any way, SIGKILL included, the pipe reaches end of file: the launcher
and its ssh sessions are then stopped (SIGTERM, SIGKILL after a grace), so the ranks' supervisors on the Macs
see their sessions close and stop their own process trees. Signals to the group reach the launcher; this
process waits for it and exits with its status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

GRACE = 5.0  # seconds between SIGTERM and SIGKILL to the group


def _stop_group_when_stdin_closes() -> None:
    while sys.stdin.buffer.read(4096):
        pass
    for signum in (signal.SIGTERM, signal.SIGKILL):
        os.killpg(os.getpgrp(), signum)
        time.sleep(GRACE)


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # A handler, not SIG_IGN: the launcher must not inherit an ignored signal; this process outlives it.
        signal.signal(signum, lambda *_: None)
    launcher = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    threading.Thread(target=_stop_group_when_stdin_closes, daemon=True).start()
    code = launcher.wait()
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says it


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # Not sys.exit: the interpreter's shutdown would wait on the stdin the watching thread reads, and abort.
    os._exit(status)
