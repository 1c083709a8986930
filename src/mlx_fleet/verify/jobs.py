"""One job: mlx.launch with a hostfile, every rank under check_program's supervisor, a bounded wait: the
launcher `mlx-fleet verify` and `mlx-fleet run` share.

mlx.launch runs in its own process group, under mlx_fleet.verify.guard, which stops the group when this
process is gone (even SIGKILLed); at the deadline (the ranks' own deadline plus a grace for ssh and
interpreter start-up), on an interrupt, or (``stop_on_failure``) once a rank has failed, the whole group is
stopped, which closes every rank's ssh session; the supervisor on each Mac stops its child's process tree
when that happens, and the caller then kills whatever is still recorded as running (nodes.stop). Each
rank's output is sorted out of mlx.launch's merged stream into its own log; when that stream came with a
piece of a rank's line missing (mlx.launch merges by reads, not lines), every rank's own record is read
back from its Mac.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text, load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable
from mlx_fleet.verify import nodes
from mlx_fleet.verify.check_program import ERR, EVENT, OUT, TagReader, read_tagged

GRACE_SECONDS = 30  # ssh, interpreter and MLX start-up on top of the ranks' deadline
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: |$)")
_EXITED = re.compile(r"Node with rank (\d+) (exited with code (-?\d+)|was killed)")


class LaunchError(Exception):
    """mlx.launch cannot be found on the controller."""


def mlx_launch() -> list[str]:
    """The mlx.launch of this Python's environment (mlx-fleet[launch] installs MLX), else PATH's."""
    beside = Path(sys.executable).parent / "mlx.launch"
    found = str(beside) if beside.exists() else shutil.which("mlx.launch")
    if not found:
        raise LaunchError("mlx.launch not found on the controller: pip install 'mlx-fleet[launch]' (it brings MLX)")
    return [found]


@dataclass
class Rank:
    rank: int
    host: str
    lines: list[tuple[str, str]] = field(default_factory=list)  # (out|err|event, text) in order
    events: list[dict] = field(default_factory=list)
    garbled: int = 0
    launcher: str = ""  # what mlx.launch said about it ("exited with code 1", "was killed")
    times: list[float | None] = field(default_factory=list)  # when each line came (None: read back later)

    def _event(self, name: str) -> dict | None:
        return next((e for e in self.events if e.get("event") == name), None)

    @property
    def started(self) -> bool:
        return self._event("start") is not None

    @property
    def exit_code(self) -> int | None:
        done = self._event("exit")
        return done["code"] if done else None

    @property
    def timed_out(self) -> bool:
        return self._event("timeout") is not None

    @property
    def final(self) -> dict | None:
        """The event that says how the rank ended (exit, timeout, stall, stopped, orphaned), if it came."""
        return next((e for e in reversed(self.events) if e.get("event") in FINAL_EVENTS), None)

    @property
    def signal(self) -> str | None:
        """The signal that killed the rank's command ("SIGKILL"), if one did."""
        code = self.exit_code
        if code is None or code >= 0:
            return None
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"

    @property
    def records(self) -> list[dict]:
        found = []
        for stream, text in self.lines:
            if stream == OUT and text.startswith('{"'):
                try:
                    value = load_json(text)
                except ValueError:
                    continue
                if isinstance(value, dict) and "record" in value:
                    found.append(value)
        return found

    @property
    def error(self) -> str | None:
        """MLX's own message when the check caught one, else the exception line of a traceback the rank
        printed (a script's), else None: a rank stopped mid-traceback has no message to quote."""
        caught = [r for r in self.records if r["record"] == "error" and isinstance(r.get("message"), str)]
        if caught:
            return caught[-1]["message"]
        raised = [text.strip() for stream, text in self.lines if stream == ERR and _RAISED.match(text)]
        return raised[-1] if raised else None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.garbled

    @property
    def ending(self) -> str:
        """How this rank ended, as data: completed, garbled (completed, output lines lost), timed-out, exited,
        stopped (when another rank failed), never-started, never-reported (the launcher said why), cut (stopped
        before it finished: mlx.launch stops every other rank once one has failed)."""
        if self.ok:
            return "completed"
        if self.garbled and self.exit_code == 0:
            return "garbled"
        if self.timed_out:
            return "timed-out"
        if self._event("stall"):
            return "stalled"
        if self.exit_code is not None:
            return "killed" if self.signal else "exited"
        if self._event("stopped"):
            return "stopped"
        if not self.started:
            return "never-reported" if self.launcher else "never-started"
        return "cut"

    def outcome(self) -> str:
        """One line: how this rank ended."""
        ending, launcher = self.ending, f" ({self.launcher})" if self.launcher else ""
        if ending == "timed-out":
            return f"timed out after {self._event('timeout')['deadline']:g} s"
        if ending == "stalled":
            stall = self._event("stall")
            used = stall.get("cpu_seconds")
            return (f"stalled: no output and no CPU time for {stall['stall']:g} s"
                    + (f" ({used:g} CPU-s used before)" if isinstance(used, (int, float)) else " (CPU time unread)"))
        return {"completed": "completed", "killed": f"was killed by {self.signal}",
                "garbled": f"completed, but {self.garbled} of its output lines were lost in transit",
                "exited": f"exited with code {self.exit_code}",
                "stopped": "was stopped when another rank failed",
                "never-started": "never started",
                "never-reported": f"never reported{launcher}",
                "cut": f"stopped before it finished{launcher}"}[ending]


@dataclass
class Job:
    title: str  # "link vr-1:1 -- vr-2:1 ring"
    name: str  # the title as a file name, for logs and the Macs' records of running ranks
    kind: str  # all_sum | link | script
    backend: str
    hostfile: dict
    log_dir: Path
    ranks: list[Rank] = field(default_factory=list)
    launcher_errors: list[str] = field(default_factory=list)  # mlx.launch's own complaints
    killed: bool = False  # the controller stopped mlx.launch at the deadline
    seconds: float = 0.0
    leftovers: list[str] = field(default_factory=list)  # processes the controller had to kill
    first_failure: int | None = None  # the first rank whose end came in as a failure
    interrupted: bool = False  # Ctrl-C, SIGTERM or SIGHUP stopped it (run raised KeyboardInterrupt)
    cable: Cable | None = None  # for a link job
    reread: list[int] = field(default_factory=list)  # ranks whose output came from their own record

    @property
    def hosts(self) -> list[str]:
        return [h["ssh"] for h in self.hostfile["hosts"]]

    @property
    def passed(self) -> bool:
        return bool(self.ranks) and all(r.ok for r in self.ranks) and not self.launcher_errors

    def failed_ranks(self) -> list[Rank]:
        return [r for r in self.ranks if not r.ok]


def _reader(stream, sink: list[str], log, seen=None) -> None:
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", "replace")
        sink.append(text)
        log.write(text)
        log.flush()
        if seen:
            seen(text)
    stream.close()


def _stop_group(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True)
class Supervision:
    """What each rank's supervisor enforces: the deadline and the stall (seconds, 0: none), and whether the
    command is a program run as is rather than a script for the cluster's interpreter."""

    deadline: float = 0
    stall: float = 0
    as_is: bool = False

    def argv(self, job: str) -> list[str]:
        return (["supervise", "--job", job, "--deadline", f"{self.deadline:g}", "--stall", f"{self.stall:g}"]
                + (["--as-is"] if self.as_is else []))


def _argv(job: Job, launcher: list[str], python: str, rundir: str, command: list[str],
          supervision: Supervision) -> list[str]:
    """mlx.launch with the job's hostfile; one Mac alone (the single-Mac baseline) is run over plain ssh
    with the same interpreter and environment, as MLX's ring launcher cannot start a group of one."""
    # Paths relative to rundir, the ranks' working folder: it is not at the same place on every Mac.
    supervised = [python, "-B", "check_program.py", *supervision.argv(job.name), "--", *command]
    if len(job.hosts) == 1:
        env = [*job.hostfile["envs"], "MLX_RANK=0"]
        return nodes.ssh_argv(nodes.by_name(job.hosts[0]),
                              f"cd {shlex.quote(rundir)} && " + shlex.join(["env", *env, *supervised]))
    hostfile = job.log_dir / "hostfile.json"
    atomic_write_text(hostfile, json_text(job.hostfile, final_newline=False))  # as MLX writes a hostfile
    return [*launcher, "--hostfile", str(hostfile), "--backend", job.backend, "--cwd", rundir, "--", *supervised]


def failed(event: dict) -> bool:
    """Whether a rank's final event says it failed."""
    return event.get("event") in FINAL_EVENTS and not (event["event"] == "exit" and event.get("code") == 0)


def run(job: Job, *, launcher: list[str], python: str, rundir: str, command: list[str], deadline: float,
        supervision: Supervision | None = None, on_output=None, stop_on_failure: bool = False) -> Job:
    """Run command (check_program arguments, or a script and its arguments) on every rank of job, each rank
    stopped after DEADLINE seconds (0: none) or as SUPERVISION says. ON_OUTPUT(rank, stream, text or event) is
    called for each rank's line as it comes; with STOP_ON_FAILURE the job is stopped as soon as a rank failed."""
    supervision = supervision or Supervision(deadline)
    job.log_dir.mkdir(parents=True, exist_ok=True)
    argv = _argv(job, launcher, python, rundir, command, supervision)
    out: list[str] = []
    err: list[str] = []
    reader = TagReader()
    failure = threading.Event()

    def seen(text: str) -> None:
        for rank, stream, value in reader.feed(text, time.time()):
            if on_output:
                on_output(rank, stream, value)
            if stream == EVENT and failed(value) and job.first_failure is None:
                job.first_failure = rank
                failure.set()

    started = time.monotonic()
    with open(job.log_dir / "launch.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        # Under the guard, which stops the group once the pipe of its stdin closes: this process is gone.
        process = subprocess.Popen([sys.executable, "-m", "mlx_fleet.verify.guard", "--", *argv],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True, cwd="/", env=nodes.launcher_env())
        readers = [threading.Thread(target=_reader, args=(pipe, sink, log, check), daemon=True)
                   for pipe, sink, check in ((process.stdout, out, seen), (process.stderr, err, None))]
        for thread in readers:
            thread.start()
        try:
            _wait(process, supervision.deadline + GRACE_SECONDS if supervision.deadline else None,
                  failure if stop_on_failure else None)
        except subprocess.TimeoutExpired:
            job.killed = True
            _stop_group(process)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the ranks' logs are still written, then it goes on
            job.interrupted = True
        finally:
            if process.poll() is None:  # interrupted (Ctrl-C), or a rank failed: the launcher goes too
                _stop_group(process)
            for thread in readers:
                thread.join(timeout=10)
            process.stdin.close()
    job.seconds = round(time.monotonic() - started, 3)
    for line in err:
        reader.feed(line)
    tagged = reader.result()
    if not whole(tagged, len(job.hosts)):
        records = nodes.outputs(sorted(set(job.hosts)), rundir, job.name)
        tagged, job.reread = from_records(tagged, records)
        if job.reread:
            with open(job.log_dir / "launch.log", "a") as log:
                log.write(f"# pieces of the ranks' lines were missing above: ranks {job.reread} read back from "
                          "their own records on the Macs\n")
    _collect(job, tagged, err)
    _write_rank_logs(job)
    if job.interrupted:
        raise KeyboardInterrupt
    return job


def _wait(process: subprocess.Popen, timeout: float | None, failure: threading.Event | None) -> None:
    """Until the launcher ends, TIMEOUT passes (subprocess.TimeoutExpired) or FAILURE is set."""
    if failure is None:
        process.wait(timeout=timeout)
        return
    ends = time.monotonic() + timeout if timeout else None
    while process.poll() is None and not failure.is_set():
        if ends and time.monotonic() >= ends:
            raise subprocess.TimeoutExpired(process.args, timeout)
        failure.wait(0.2)


FINAL_EVENTS = ("exit", "timeout", "stopped", "stall", "orphaned")


def whole(tagged: dict, ranks: int) -> bool:
    """Whether the merged stream brought every rank's output complete: nothing garbled, and each rank's
    last word is how it ended (exit, timeout or stopped)."""
    for rank in range(ranks):
        state = tagged.get(rank)
        if not state or state["garbled"] or not state["events"] or state["events"][-1].get("event") not in FINAL_EVENTS:
            return False
    return True


def from_records(tagged: dict, records: dict[int, str]) -> tuple[dict, list[int]]:
    """The ranks' output with each rank that has a record (check_program's output/JOB.RANK, its every
    tagged line in order) taken from it instead of the merged stream; (that, the ranks taken)."""
    merged, taken = dict(tagged), []
    for rank, text in sorted(records.items()):
        own = read_tagged(text.splitlines()).get(rank)
        if own is not None:
            streamed = tagged.get(rank, {})  # nothing of a rank whose whole stream was lost
            came = dict(enumerate(zip(streamed.get("lines", []), streamed.get("times", []))))
            # When each line came, where the stream brought the same line at the same place.
            own["times"] = [came[i][1] if i in came and came[i][0] == line else None
                            for i, line in enumerate(own["lines"])]
            merged[rank] = own
            taken.append(rank)
    return merged, taken


def _collect(job: Job, tagged: dict, err: list[str]) -> None:
    said: dict[int, str] = {}
    for line in err:
        plain = _ANSI.sub("", line).strip()
        match = _EXITED.search(plain)
        if match:
            said[int(match.group(1))] = match.group(2)
        elif plain.startswith("usage: ") or ": error: " in plain:
            job.launcher_errors.append(plain)
    for rank, host in enumerate(job.hosts):
        state = tagged.get(rank, {})
        job.ranks.append(Rank(rank, host, state.get("lines", []), state.get("events", []), state.get("garbled", 0),
                              said.get(rank, ""), state.get("times", [])))


def rank_log(job: Job, rank: Rank) -> Path:
    return job.log_dir / f"rank-{rank.rank}-{rank.host}.log"


def _stamp(at: float | None) -> str:
    """When a line came, UTC to the millisecond; "-" for a line read back from the Mac's record."""
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"


def _write_rank_logs(job: Job) -> None:
    """One log per rank: how it ended, then each line with when it came and its stream (out, err, event)."""
    for rank in job.ranks:
        lines = [f"# {job.title}: rank {rank.rank} on {rank.host} ({job.backend}): {rank.outcome()}\n"]
        times = rank.times + [None] * (len(rank.lines) - len(rank.times))
        lines += [f"{_stamp(at)} [{stream}] {text}\n" for (stream, text), at in zip(rank.lines, times)]
        rank_log(job, rank).write_text("".join(lines))
