"""ps(1) -ax -o pid,command: this Mac's processes (the sim's nodes share the host's process table,
so the node's own are those in its network and mount namespaces). Other forms are refused."""

import os

from .state import Fail, out


def _ns(pid: str, kind: str):
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def main(argv: list[str]) -> int:
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
