"""One job: mlx.launch with a hostfile, every rank under check_program's supervisor, a bounded wait.

mlx.launch runs in its own process group; at the deadline (the ranks' own deadline plus a grace
for ssh and interpreter start-up) the whole group is stopped, which closes every rank's ssh
session; the supervisor on each Mac stops its child when that happens, and the controller then
kills whatever is still recorded as running (nodes.stop). Each rank's output is sorted out of
mlx.launch's merged stream into its own log; when that stream came with a piece of a rank's line
missing (mlx.launch merges by reads, not lines), every rank's own record is read back from its Mac.
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
from mlx_fleet.verify.check_program import ERR, OUT, read_tagged

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
        if self.exit_code is not None:
            return "exited"
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
        return {"completed": "completed",
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


def _reader(stream, sink: list[str], log) -> None:
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", "replace")
        sink.append(text)
        log.write(text)
        log.flush()
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


def _argv(job: Job, launcher: list[str], python: str, rundir: str, command: list[str], deadline: float) -> list[str]:
    """mlx.launch with the job's hostfile; one Mac alone (the single-Mac baseline) is run over plain ssh
    with the same interpreter and environment, as MLX's ring launcher cannot start a group of one."""
    # Paths relative to rundir, the ranks' working folder: it is not at the same place on every Mac.
    supervised = [python, "-B", "check_program.py", "supervise", "--job", job.name, "--deadline",
                  f"{deadline:g}", "--", *command]
    if len(job.hosts) == 1:
        env = [*job.hostfile["envs"], "MLX_RANK=0"]
        return nodes.ssh_argv(nodes.by_name(job.hosts[0]),
                              f"cd {shlex.quote(rundir)} && " + shlex.join(["env", *env, *supervised]))
    hostfile = job.log_dir / "hostfile.json"
    atomic_write_text(hostfile, json_text(job.hostfile, final_newline=False))  # as MLX writes a hostfile
    return [*launcher, "--hostfile", str(hostfile), "--backend", job.backend, "--cwd", rundir, "--", *supervised]


def run(job: Job, *, launcher: list[str], python: str, rundir: str, command: list[str], deadline: float) -> Job:
    """Run command (check_program arguments, or a script and its arguments) on every rank of job."""
    job.log_dir.mkdir(parents=True, exist_ok=True)
    argv = _argv(job, launcher, python, rundir, command, deadline)
    out: list[str] = []
    err: list[str] = []
    started = time.monotonic()
    with open(job.log_dir / "launch.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True, cwd="/")
        readers = [threading.Thread(target=_reader, args=(pipe, sink, log), daemon=True)
                   for pipe, sink in ((process.stdout, out), (process.stderr, err))]
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout=deadline + GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            job.killed = True
            _stop_group(process)
        finally:
            if process.poll() is None:  # interrupted (Ctrl-C): the launcher goes too, before the log closes
                _stop_group(process)
            for reader in readers:
                reader.join(timeout=10)
    job.seconds = round(time.monotonic() - started, 3)
    tagged = read_tagged(out + err)
    if not whole(tagged, len(job.hosts)):
        records = nodes.outputs(sorted(set(job.hosts)), rundir, job.name)
        tagged, job.reread = from_records(tagged, records)
        if job.reread:
            with open(job.log_dir / "launch.log", "a") as log:
                log.write(f"# pieces of the ranks' lines were missing above: ranks {job.reread} read back from "
                          "their own records on the Macs\n")
    _collect(job, tagged, err)
    _write_rank_logs(job)
    return job


FINAL_EVENTS = ("exit", "timeout", "stopped")


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
                              said.get(rank, "")))


def _write_rank_logs(job: Job) -> None:
    for rank in job.ranks:
        lines = [f"# {job.title}: rank {rank.rank} on {rank.host} ({job.backend}): {rank.outcome()}\n"]
        lines += [f"[{stream}] {text}\n" for stream, text in rank.lines]
        (job.log_dir / f"rank-{rank.rank}-{rank.host}.log").write_text("".join(lines))
