"""The program `mlx-fleet verify` and `mlx-fleet run` run on every Mac through mlx.launch (standard library and MLX).

It is copied, with the user's script if any, into a private folder on each Mac and started by
mlx.launch with the cluster's interpreter, one process per rank:

    python check_program.py supervise --job NAME --deadline SECONDS [--stall SECONDS] [--as-is] -- SCRIPT [ARGS...]
        runs SCRIPT with this same interpreter (with --as-is: a program, this interpreter's folder first on
        PATH) as a child process, in a session of its own. Every line the child prints
        (stdout or stderr) comes out on stdout tagged with the rank, a sequence number and the
        stream, because mlx.launch merges all ranks' output into one stream; the controller
        sorts it back into one log per rank (``read_tagged``). mlx.launch merges the ranks'
        streams by whatever each read of a rank's ssh returned, not by lines, so a line can
        arrive cut in two with another rank's output in between: every tagged line is also
        appended to output/NAME.RANK beside this file, the rank's own record, which the
        controller reads back when the merged stream came with a piece missing. The child's whole
        process tree is stopped (SIGTERM, SIGKILL after a grace) at the deadline (0: none), on a
        stall (no output and no CPU time by ps for --stall seconds), when this process is told to
        stop (mlx.launch, the ssh connection's hangup) or when its launcher is gone (its parent
        changes), so one bad rank never leaves processes behind; while it runs, its process ids
        are in running/NAME.RANK beside this file, for the controller to stop it.

    python check_program.py all_sum --backend ring --sizes 1024,4096
        all_sum over every rank at each size, every element checked on every rank, timed.

    python check_program.py link --backend ring --sizes 1024,4096
        two ranks only (the two ends of one cable): ping-pong with send/recv, data checked.

Results are JSON lines starting with {"record": ...} on stdout. An MLX error is printed as a
record too ({"record": "error", "phase": ..., "message": MLX's own message}) before the rank
exits 1. Python 3.9 compatible: it runs on whatever interpreter the cluster uses.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

TAG = "@mlx-fleet-verify"
# Payload characters per tagged line: a long line goes out in pieces of this size.
PIECE = 300
OUT, ERR, EVENT = "out", "err", "event"
MORE = "+"  # kind suffix: the line goes on in the next piece of the same rank and stream
RUNNING_DIR = "running"
OUTPUT_DIR = "output"  # each rank's tagged lines, in order: output/JOB.RANK


BUDGET_SECONDS = 0.5  # timed repetitions per size take about this long: 3 to 50 of them


# --- supervise ------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    """All of data to fd: a write() may take only part of it."""
    while data:
        data = data[os.write(fd, data):]


class _Tagged:
    """Writes tagged lines, numbered per rank, to the rank's record (the file RECORD, when given) and
    then to stdout: whatever the controller sees on the stream is in the record already."""

    def __init__(self, rank: str, record: str | None = None):
        self.rank = rank
        self.seq = 0
        self.lock = threading.Lock()
        self.record = None
        if record:
            try:
                os.makedirs(os.path.dirname(record), exist_ok=True)
                self.record = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            except OSError:
                pass  # no record: the stream alone

    def _write(self, kind: str, payload: str) -> None:
        with self.lock:
            line = "{0} {1} {2} {3} {4}\n".format(TAG, self.rank, self.seq, kind, payload).encode("utf-8", "replace")
            self.seq += 1
            for fd in (self.record, 1):
                if fd is None:
                    continue
                try:
                    _write_all(fd, line)
                except OSError:
                    pass  # a full disk, or the controller has gone (ssh closed): nothing left to tell there

    def line(self, stream: str, text: str) -> None:
        pieces = [text[i:i + PIECE] for i in range(0, len(text), PIECE)] or [""]
        for i, piece in enumerate(pieces):
            self._write(stream + (MORE if i < len(pieces) - 1 else ""), json.dumps(piece))

    def event(self, **fields) -> None:
        self._write(EVENT, json.dumps(fields, sort_keys=True))


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()  # str.isdigit() alone takes "²", which int() refuses


def _event_ok(value) -> bool:
    """An event as _Tagged.event writes it: an object naming the event, with an integer exit code and a
    numeric deadline where those events carry them."""
    if not isinstance(value, dict) or not isinstance(value.get("event"), str):
        return False
    wanted = {"exit": ("code", int), "timeout": ("deadline", (int, float))}.get(value["event"])
    return wanted is None or (isinstance(value.get(wanted[0]), wanted[1]) and not isinstance(value[wanted[0]], bool))


class TagReader:
    """The controller's side of the format, a line at a time: mlx.launch's merged output (or a rank's record)
    -> per rank {"lines": [(stream, text)] in order (stream out, err or event), "times": when each line came
    (None when not read as it came), "events": [dict], "garbled": count}. Lines without a tag (mlx.launch's own,
    or a piece another rank's output cut into) are left out; a lost or mangled piece of a rank's output is
    counted in "garbled", never guessed."""

    def __init__(self):
        self.ranks: dict = {}
        self.partial: dict = {}

    def feed(self, line: str, at: float | None = None) -> list:
        """Read one line (AT: when it came); the (rank, stream, text or event) it completed, in order."""
        done = []
        for chunk in line.rstrip("\r\n").split(TAG + " ")[1:]:
            words = chunk.split(" ", 3)
            if len(words) != 4 or not _number(words[0]) or not _number(words[1]):
                continue
            rank, seq, kind, payload = int(words[0]), int(words[1]), words[2], words[3].rstrip("\r")
            state = self.ranks.setdefault(rank, {"lines": [], "times": [], "events": [], "garbled": 0, "next": 0})
            if seq != state["next"]:
                state["garbled"] += 1
            state["next"] = seq + 1
            try:
                value = json.loads(payload)
            except (ValueError, RecursionError):
                state["garbled"] += 1
                continue
            if kind == EVENT:
                if not _event_ok(value):
                    state["garbled"] += 1
                    continue
                state["events"].append(value)
                self._add(state, EVENT, payload, at)
                done.append((rank, EVENT, value))
                continue
            stream = kind.rstrip(MORE)
            if stream not in (OUT, ERR) or not isinstance(value, str):
                state["garbled"] += 1
                continue
            text = self.partial.pop((rank, stream), "") + value
            if kind.endswith(MORE):
                self.partial[(rank, stream)] = text
            else:
                self._add(state, stream, text, at)
                done.append((rank, stream, text))
        return done

    @staticmethod
    def _add(state: dict, stream: str, text: str, at: float | None) -> None:
        state["lines"].append((stream, text))
        state["times"].append(at)

    def result(self) -> dict:
        ranks = {rank: {key: (list(value) if isinstance(value, list) else value) for key, value in state.items()
                        if key != "next"} for rank, state in self.ranks.items()}
        for (rank, stream), text in self.partial.items():
            self._add(ranks[rank], stream, text, None)
            ranks[rank]["garbled"] += 1  # its last piece never came
        return ranks


def read_tagged(lines) -> dict:
    """TagReader's result for all of LINES at once."""
    reader = TagReader()
    for line in lines:
        reader.feed(line)
    return reader.result()


def _pump(pipe, stream: str, tagged: _Tagged, progress: _Progress) -> None:
    for raw in iter(pipe.readline, b""):
        progress.output()
        tagged.line(stream, raw.decode("utf-8", "replace").rstrip("\r\n"))
    pipe.close()


STOP_GRACE = 5.0  # seconds a stopped child's process tree gets between SIGTERM and SIGKILL
POLL = 0.5  # seconds between the supervisor's looks at its child, its launcher and the clock
_CPU_TIME = re.compile(r"^(\d+):(\d\d)\.(\d\d)$")  # ps -o time on macOS: minutes:seconds.hundredths


def _processes():
    """pid -> (parent pid, CPU seconds or None) of every process, from ps(1); {} when ps cannot tell."""
    try:
        out = subprocess.run(["ps", "-ax", "-o", "pid=,ppid=,time="], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    table = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 3 and _number(words[0]) and _number(words[1]):
            clock = _CPU_TIME.match(words[2])
            table[int(words[0])] = (int(words[1]), int(clock.group(1)) * 60 + int(clock.group(2))
                                    + int(clock.group(3)) / 100 if clock else None)
    return table


def _tree(root: int, table: dict) -> list:
    """root and every process below it in TABLE (_processes)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in found:
            found.append(pid)
            todo += [child for child, (parent, _) in table.items() if parent == pid]
    return found


def _cpu_seconds(root: int):
    """CPU seconds root's process tree has used, or None when ps does not say."""
    table = _processes()
    used = [table[pid][1] for pid in _tree(root, table)]
    return sum(used) if used and None not in used else None


def _stop_tree(child) -> None:
    """The child's whole process tree (its own session, and whatever below it left that): SIGTERM, then
    SIGKILL to what is left after STOP_GRACE seconds."""
    pids = _tree(child.pid, _processes())
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for target in [-child.pid] + pids:
            try:
                os.kill(target, signum)
            except OSError:
                pass
        ends = time.monotonic() + STOP_GRACE
        while signum == signal.SIGTERM and time.monotonic() < ends:
            if child.poll() is not None and not [p for p in pids if _alive(p)]:
                return
            time.sleep(0.1)
    child.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    table = _processes()
    return pid in table if table else True


class _Progress:
    """When the child last showed progress: a line out, or CPU time used (--stall)."""

    def __init__(self):
        self.at = time.monotonic()
        self.cpu = None

    def output(self) -> None:
        self.at = time.monotonic()

    def quiet_for(self, root: int) -> float:
        """Seconds without output nor CPU progress (ps read only once the output went quiet)."""
        now = time.monotonic()
        if now - self.at < 1:
            return now - self.at
        cpu = _cpu_seconds(root)
        if cpu is not None and (self.cpu is None or cpu > self.cpu):
            self.cpu, self.at = cpu, now
        return now - self.at


def supervise(job: str, deadline: float, command: list, stall: float = 0, run_as_is: bool = False) -> int:
    """Run COMMAND (a script for this interpreter, or with RUN_AS_IS a program) until it ends, the DEADLINE
    (seconds, 0: none), a STALL (no output and no CPU time for that many seconds), a signal, or its launcher
    going away (the ssh session closed: the parent changes); its whole process tree is stopped then."""
    rank = os.environ.get("MLX_RANK", "0")
    here = os.path.dirname(os.path.abspath(__file__))
    tagged = _Tagged(rank, os.path.join(here, OUTPUT_DIR, "{0}.{1}".format(job, rank)))
    running = os.path.join(here, RUNNING_DIR, "{0}.{1}".format(job, rank))
    # No bytecode cache beside the script or in the environment's packages: those are not verify's to change.
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    # The interpreter's folder first: a command as is ("python -m ...") finds the cluster's environment.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    launcher = os.getppid()
    told = []
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda signum, _frame: told.append(signum))
    started = time.monotonic()
    # Its own session: the child's tree is stopped as one, and a hangup reaches it only through this process.
    child = subprocess.Popen(command if run_as_is else [sys.executable] + command, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    os.makedirs(os.path.dirname(running), exist_ok=True)
    with open(running, "w") as handle:
        handle.write("{0} {1}\n".format(os.getpid(), child.pid))
    tagged.event(event="start", pid=os.getpid(), child=child.pid, python=platform.python_version(),
                 executable=sys.executable)
    progress = _Progress()
    pumps = [threading.Thread(target=_pump, args=(pipe, stream, tagged, progress), daemon=True)
             for pipe, stream in ((child.stdout, OUT), (child.stderr, ERR))]
    for pump in pumps:
        pump.start()
    ending = None
    while child.poll() is None and ending is None:
        seconds = round(time.monotonic() - started, 3)
        if told:
            ending = dict(event="stopped", signal=told[0], seconds=seconds)
        elif os.getppid() != launcher:
            ending = dict(event="orphaned", launcher=launcher, seconds=seconds)
        elif deadline and seconds >= deadline:
            ending = dict(event="timeout", deadline=deadline, seconds=seconds)
        elif stall and progress.quiet_for(child.pid) >= stall:
            ending = dict(event="stall", stall=stall, cpu_seconds=progress.cpu, seconds=seconds)
        else:
            try:
                child.wait(POLL)  # returns as the child ends: its rank's end is not held up to the next look
            except subprocess.TimeoutExpired:
                pass
    if ending:
        _stop_tree(child)
    for pump in pumps:
        pump.join(timeout=5)
    if ending is None:
        code = child.returncode
        tagged.event(event="exit", code=code, seconds=round(time.monotonic() - started, 3))
    else:
        tagged.event(**ending)
        code = {"stopped": 128 + (told or [0])[0], "timeout": 124}.get(ending["event"], 125)
    _forget(running)
    return 0 if code == 0 else 1


def _forget(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# --- checks (need MLX) --------------------------------------------------------------------------------


def _emit(record: dict) -> None:
    print(json.dumps(record, sort_keys=True), flush=True)


def _init(backend: str):
    import mlx.core as mx

    # jaccl-ring is a launch mode of the jaccl backend (mlx.launch sets MLX_JACCL_RING).
    name = "jaccl" if backend.startswith("jaccl") else backend
    group = mx.distributed.init(strict=True, backend=name)
    _emit({"record": "init", "rank": group.rank(), "size": group.size(), "backend": backend,
           "mlx": mx.__version__, "device": str(mx.default_device())})
    return mx, group


def _pattern(mx, count: int):
    # Small integers: exact in float32 whatever the order of the additions.
    return (mx.arange(count) % 97).astype(mx.float32)


def _mismatch(mx, got, want) -> dict:
    wrong = mx.not_equal(got, want)
    bad = int(mx.sum(wrong).item())
    if not bad:
        return {"bad": 0}
    first = int(mx.argmax(wrong).item())
    return {"bad": bad, "first_bad": first, "got": float(got[first].item()), "want": float(want[first].item())}


def _repetitions(mx, group, first: float) -> int:
    """How many timed repetitions fit the budget, the same on every rank (all_max of the first pass)."""
    slowest = mx.distributed.all_max(mx.array([first], dtype=mx.float32), group=group)
    return max(3, min(50, int(BUDGET_SECONDS / max(slowest.item(), 1e-6))))


def all_sum(mx, group, sizes: list) -> int:
    rank, n = group.rank(), group.size()
    failed = False
    for size in sizes:
        count = max(1, size // 4)
        base = _pattern(mx, count)
        mine = base + (rank + 1)
        want = base * n + n * (n + 1) // 2
        mx.eval(mine, want)
        started = time.perf_counter()
        got = mx.distributed.all_sum(mine, group=group)
        mx.eval(got)  # the first pass (not counted) sets up buffers and connections
        first = time.perf_counter() - started
        check = _mismatch(mx, got, want)
        seconds = []
        for _ in range(_repetitions(mx, group, first)):
            started = time.perf_counter()
            got = mx.distributed.all_sum(mine, group=group)
            mx.eval(got)
            seconds.append(time.perf_counter() - started)
        last = _mismatch(mx, got, want)
        if last["bad"] and not check["bad"]:
            check = last
        failed = failed or bool(check["bad"])
        _emit(dict(check, record="all_sum", rank=rank, size=count * 4, seconds=seconds))
    return 1 if failed else 0


def link(mx, group, sizes: list) -> int:
    rank = group.rank()
    if group.size() != 2:
        raise ValueError("the link check runs on the two ends of one cable, got {0} ranks".format(group.size()))
    peer = 1 - rank
    failed = False
    for size in sizes:
        count = max(1, size // 4)
        sent = _pattern(mx, count) + 1
        mx.eval(sent)
        seconds = []
        check = {"bad": 0}
        repetitions = None
        while repetitions is None or len(seconds) < repetitions:
            started = time.perf_counter()
            if rank == 0:
                mx.eval(mx.distributed.send(sent, peer, group=group))
                got = mx.distributed.recv_like(sent, peer, group=group)
                mx.eval(got)
            else:
                got = mx.distributed.recv_like(sent, peer, group=group)
                mx.eval(got)
                mx.eval(mx.distributed.send(got, peer, group=group))
            elapsed = time.perf_counter() - started
            if not check["bad"]:
                check = _mismatch(mx, got, sent)
            if repetitions is None:  # the first round trip (not counted) sets up buffers
                repetitions = _repetitions(mx, group, elapsed)
            else:
                seconds.append(elapsed)
        failed = failed or bool(check["bad"])
        # A round trip carries the message once each way.
        _emit(dict(check, record="link", rank=rank, size=count * 4, round_trip_seconds=seconds))
    return 1 if failed else 0


CHECKS = {"all_sum": all_sum, "link": link}


def _failed(phase: str, exc: Exception) -> int:
    traceback.print_exc()
    _emit({"record": "error", "phase": phase, "type": type(exc).__name__, "message": str(exc)})
    return 1


def _run_check(name: str, backend: str, sizes: list) -> int:
    # MLX's own message is the evidence: it is kept whole, with the phase it came from.
    try:
        mx, group = _init(backend)
    except Exception as exc:
        return _failed("init", exc)
    try:
        return CHECKS[name](mx, group, sizes)
    except Exception as exc:
        return _failed(name, exc)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="check_program.py")
    sub = parser.add_subparsers(dest="mode", required=True)
    sup = sub.add_parser("supervise")
    sup.add_argument("--job", required=True)
    sup.add_argument("--deadline", type=float, required=True, help="seconds, 0: none")
    sup.add_argument("--stall", type=float, default=0, help="seconds without output nor CPU time, 0: no limit")
    sup.add_argument("--as-is", action="store_true", help="the command is a program, not a script")
    sup.add_argument("command", nargs=argparse.REMAINDER)
    for name in CHECKS:
        check = sub.add_parser(name)
        check.add_argument("--backend", required=True)
        check.add_argument("--sizes", required=True, help="bytes, comma-separated")
    args = parser.parse_args(argv)
    if args.mode == "supervise":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return supervise(args.job, args.deadline, command, args.stall, args.as_is)
    return _run_check(args.mode, args.backend, [int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    sys.exit(main())
