"""ps(1) -ax -o pid,command, -ax -o pid,ppid,etime,rss,command and -ax -o pid=,ppid=,time= (CPU time as macOS
prints it, minutes:seconds.hundredths), as macOS's BSD ps prints them: this Mac's
processes (the sim's nodes share the host's process table, so the node's own are those in its network
namespace, told by the inode of /proc/PID/net/dev, which any account may read, as macOS's ps lists every
account's processes). A parent outside the node is printed as pid 1: on a Mac every process descends from launchd,
and an orphan is reparented to it. Other forms are refused."""

import os

from .state import Fail, out

FORMATS = {"pid,command": "  PID COMMAND\n", "pid=,command=": "",
           "pid,ppid,etime,rss,command": "  PID  PPID     ELAPSED    RSS COMMAND\n", "pid=,ppid=,time=": ""}
LAUNCHD = 1


def _node(pid) -> int | None:
    """The network namespace PID runs in (each simulated Mac has its own), None once it is gone."""
    try:
        return os.stat(f"/proc/{pid}/net/dev").st_ino
    except OSError:
        return None


def _etime(seconds: int) -> str:
    """[[dd-]hh:]mm:ss, as BSD ps prints etime."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{minutes:02d}:{secs:02d}"
    if days or hours:
        text = f"{hours:02d}:{text}"
    return f"{days}-{text}" if days else text


def _cpu_time(hundredths: int) -> str:
    """M:SS.hh, as BSD ps prints time (user and system CPU)."""
    seconds, hundredths = divmod(hundredths, 100)
    return f"{seconds // 60:3d}:{seconds % 60:02d}.{hundredths:02d}"


def _stat(pid: str) -> tuple[int, int, int, int]:
    """(ppid, seconds since it started, rss in KiB, CPU time in hundredths of a second)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    cpu = (int(fields[11]) + int(fields[12])) * 100 // os.sysconf("SC_CLK_TCK")
    return int(fields[1]), max(0, int(uptime - started)), rss, cpu


def main(argv: list[str]) -> int:
    if argv[:2] == ["-ax", "-o"] and len(argv) == 3:
        form = argv[2]
    elif argv[:1] == ["-axo"] and len(argv) == 2:
        form = argv[1]
    else:
        form = None
    if form not in FORMATS:
        raise Fail("ps: only -ax -o pid,command, pid,ppid,etime,rss,command and pid=,ppid=,time= are simulated\n", 1)
    mine = _node("self")
    text = FORMATS[form]
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if _node(pid) != mine or pid == str(os.getpid()):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = [w.decode(errors="replace") for w in f.read().split(b"\0") if w]
            ppid, age, rss, cpu = _stat(pid)
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
        if not words or (len(words) > 2 and words[2] == "ps" and words[1].endswith("dispatch.py")):
            continue
        if _node(ppid) != mine:
            ppid = LAUNCHD
        if form == "pid=,ppid=,time=":
            text += f"{int(pid):5d} {ppid:5d} {_cpu_time(cpu)}\n"
        elif form.startswith("pid,ppid"):
            text += f"{int(pid):5d} {ppid:5d} {_etime(age):>11} {rss:6d} {' '.join(words)}\n"
        else:
            text += f"{int(pid):5d} {' '.join(words)}\n"
    out(text)
    return 0
