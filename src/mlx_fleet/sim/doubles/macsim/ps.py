"""ps(1) -ax -o pid,command, or -ax -o pid=,ppid=,time= (CPU time as macOS prints it, minutes:seconds.hundredths):
this Mac's processes (the sim's nodes share the host's process table, so the node's own are those in its network
and mount namespaces). Other forms are refused."""

import os

from .state import Fail, out


def _ns(pid: str, kind: str):
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


TIMES = ["-ax", "-o", "pid=,ppid=,time="]


def _times(pid: str) -> str | None:
    """"PID PPID M:SS.ss" from /proc/PID/stat (utime and stime in clock ticks), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    hundredths = (int(fields[11]) + int(fields[12])) * 100 // os.sysconf("SC_CLK_TCK")
    seconds, hundredths = divmod(hundredths, 100)
    return f"{int(pid):5d} {int(fields[1]):5d} {seconds // 60:3d}:{seconds % 60:02d}.{hundredths:02d}"


def main(argv: list[str]) -> int:
    if argv == TIMES:
        return _main_times()
    if argv not in (["-ax", "-o", "pid,command"], ["-axo", "pid,command"], ["-ax", "-o", "pid=,command="],
                    ["-axo", "pid=,command="]):
        raise Fail("ps: only -ax -o pid,command is simulated\n", 1)
    mine = (_ns("self", "net"), _ns("self", "mnt"))
    header = not argv[-1].endswith("=")
    text = "  PID COMMAND\n" if header else ""
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if (_ns(pid, "net"), _ns(pid, "mnt")) != mine or pid == str(os.getpid()):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = [w.decode(errors="replace") for w in f.read().split(b"\0") if w]
        except OSError:
            continue
        if words and not (len(words) > 2 and words[2] == "ps" and words[1].endswith("dispatch.py")):
            text += f"{int(pid):5d} {' '.join(words)}\n"
    out(text)
    return 0


def _main_times() -> int:
    mine = (_ns("self", "net"), _ns("self", "mnt"))
    rows = [_times(pid) for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int)
            if (_ns(pid, "net"), _ns(pid, "mnt")) == mine and pid != str(os.getpid())]
    out("".join(row + "\n" for row in rows if row))
    return 0
