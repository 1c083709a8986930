"""The Macs, over plain ssh (as mlx.launch reaches them): stage the check program, read what the
diagnosis needs through macOS tools, stop what a failed job left behind, clean up.

Every call is one ssh round trip per Mac, run for all Macs at once, with a connect timeout and
an overall timeout: a Mac that does not answer is reported unreachable, never waited for.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shlex
import shutil
import stat
import subprocess
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands, macos_parsers, node_facts
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget
from mlx_fleet.capture import remote_command
from mlx_fleet.verify.check_program import OUTPUT_DIR, RUNNING_DIR

CONNECT_TIMEOUT = 10
SSH_TIMEOUT = 60
_TICK = 0.05  # seconds between a bounded read's looks at its status (its answer is not held up longer)
CONTROL_PERSIST = 30  # seconds a shared connection outlives its last session (shared_connections)
_MARK = "@@mlx-fleet-verify-section"
# The reads the diagnosis uses (macos_commands.READS), made into facts as the modules make them
# (module_utils.node_facts); RDMA ones only for an RDMA backend.
NETWORK_READS = ("hardware_ports", "ifconfig", "service_order", "thunderbolt")  # thunderbolt: what each port reaches
RDMA_READS = ("rdma_ctl", "ibv_devices", "ibv_devinfo", "sw_vers")  # sw_vers: RDMA needs macOS 26.2
# The interpreter's versions, as the ranks will run it.
_VERSIONS = "import platform, mlx.core as mx; print(platform.python_version(), mx.__version__)"


@dataclass
class Node:
    host: str
    reachable: bool = True
    error: str = ""  # why not reachable, or why staging failed
    staged: bool = False  # the run's folder was made on this Mac by this run (only then is it cleaned up)
    reads: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (rc, stdout)
    python: str | None = None  # "3.12.8" when the interpreter runs and imports MLX
    mlx: str | None = None
    python_error: str = ""

    def parsed(self, name: str, parser: str):
        """A read parsed with the collection's parser, or None when it failed or did not parse."""
        rc, text = self.reads.get(name, (1, ""))
        if rc != 0:
            return None
        try:
            return getattr(macos_parsers, parser)(text)
        except ValueError:
            return None

    @property
    def macos(self) -> dict:
        return self.parsed("sw_vers", "parse_sw_vers") or {}

    @property
    def ports(self) -> dict[int, str]:
        """Thunderbolt receptacle number -> enX."""
        ports = self.parsed("hardware_ports", "parse_hardware_ports")
        return macos_parsers.thunderbolt_interfaces(ports) if ports else {}

    @property
    def interfaces(self) -> dict | None:
        return self.parsed("ifconfig", "parse_ifconfig")

    def addresses(self, device: str) -> list[str]:
        """The port's IPv4 addresses, address/prefix, as mlx_fleet_thunderbolt lists them."""
        return node_facts.port_addresses(self.interfaces or {}, device)

    @property
    def thunderbolt(self) -> dict | None:
        """mlx_fleet_thunderbolt as the modules make it (module_utils.node_facts: the same RDMA judgement of
        rdma_ctl and ibv_devices, an unknown wording included), for the ports this run reads (no port speeds:
        system_profiler is not read); None when the RDMA reads were not made or ibv_devinfo did not parse."""
        if not all(name in self.reads for name in RDMA_READS):
            return None
        results = {name: (rc, text, "") for name, (rc, text) in self.reads.items()}
        try:
            status, enabled, devices, states, unread = node_facts.rdma_state(node_facts.OutsideModule(), results)
        except ValueError:
            return None
        interfaces = self.interfaces or {}
        return {"ports": [node_facts.port_facts(receptacle, device, interfaces, devices, states)
                          for receptacle, device in sorted(self.ports.items())],
                "bridge": self.bridge, "rdma_enabled": enabled, "rdma_status": status, "rdma_devices": devices,
                "rdma_unread": unread}

    @property
    def cabling(self) -> dict | None:
        """The Thunderbolt ports with what each one reaches (node_facts.thunderbolt, as the modules and the watch
        read them), to find the cables by; None when system_profiler was not read or its output not understood."""
        if "thunderbolt" not in self.reads:
            return None
        results = {name: (node_facts.MISSING, "", "") for name in ("rdma_ctl", "ibv_devices", "ibv_devinfo")}
        results.update({name: (rc, text, "") for name, (rc, text) in self.reads.items()})
        try:
            return node_facts.thunderbolt(node_facts.OutsideModule(), results)
        except (ValueError, KeyError):
            return None

    @property
    def bridge(self) -> dict:
        """The Thunderbolt Bridge as mlx_fleet_thunderbolt describes it (service unread: taken as disabled)."""
        return node_facts.bridge_state(self.interfaces or {},
                                       self.parsed("service_order", "parse_network_service_order") or [])


_shared: Path | None = None  # the folder of shared_connections()'s control sockets, while it lasts


_SHARED_PREFIX = "mlx-fleet-ssh-"  # + the owning process's pid + "-": a folder of shared_connections()


@contextlib.contextmanager
def shared_connections():
    """Inside: one ssh connection per Mac for every round (OpenSSH's ControlMaster), each round after the first a
    session on it, without a handshake. The control sockets are in a private folder of this process; on leaving,
    each connection is closed (a process killed before: they close themselves after CONTROL_PERSIST idle
    seconds, and the next run removes the folder)."""
    global _shared
    _remove_stale_folders()
    folder = Path(tempfile.mkdtemp(prefix=f"{_SHARED_PREFIX}{os.getpid()}-"))  # 0700, this user's
    _shared = folder
    try:
        yield
    finally:
        _shared = None
        _close_and_remove(folder)


def _close_and_remove(folder: Path) -> None:
    for socket_path in (path for path in folder.iterdir() if path.is_socket()):
        subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "mac"], capture_output=True,
                       timeout=10, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def _remove_stale_folders() -> None:
    """The folders shared_connections() left when its process was killed: this user's own (not a link), named
    after a process that is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_SHARED_PREFIX}*-*"):
        pid = folder.name[len(_SHARED_PREFIX):].split("-", 1)[0]
        try:
            info = folder.lstat()
            if not (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and pid.isdigit()):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _close_and_remove(folder)
        except OSError:  # gone meanwhile, or a process of another user: not ours to judge
            continue


def launcher_env() -> dict[str, str] | None:
    """The environment for mlx.launch: within shared_connections(), its `ssh HOST` (which reads the user's ssh
    config) goes over the connection open to the Mac by that name (the staging's, by_name; the socket's %C is the
    address, port and user it resolves to), else connects as it would have; outside, None (this process's
    environment)."""
    real = shutil.which("ssh")
    if _shared is None or real is None:  # no ssh to wrap: a wrapper calling `ssh` would find itself
        return None
    wrapper = _shared / "bin" / "ssh"
    if not wrapper.exists():
        wrapper.parent.mkdir(mode=0o700)
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(real)} -o ControlMaster=no "
                           f"-o {shlex.quote(f'ControlPath={_shared}/%C')} \"$@\"\n")
        wrapper.chmod(0o700)
    return {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def ssh_argv(target: SshTarget, command: str, options: tuple[str, ...] = (),
             connect_timeout: float = CONNECT_TIMEOUT) -> list[str]:
    """`ssh TARGET COMMAND` without a terminal or prompts (the user's ssh config applies, as for mlx.launch;
    TARGET carries the inventory's settings, where it has them; OPTIONS come before them). COMMAND runs under
    /bin/sh: a Mac's login shell is zsh, which rejects a glob that matches nothing. Within shared_connections(),
    on the Mac's shared connection."""
    shared = ("-o", "ControlMaster=auto", "-o", f"ControlPath={_shared}/%C",
              "-o", f"ControlPersist={CONTROL_PERSIST}") if _shared else ()
    return target.argv("-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout:g}", *shared, *options,
                       command=f"/bin/sh -c {shlex.quote(command)}")


def by_name(host: str) -> SshTarget:
    """A Mac by its hostfile name, as mlx.launch reaches it (the user's ssh config alone)."""
    return SshTarget(host, host)


def ssh(target: SshTarget, command: str, stdin: bytes = b"", timeout: float = SSH_TIMEOUT, *,
        options: tuple[str, ...] = (), connect_timeout: float = CONNECT_TIMEOUT) -> subprocess.CompletedProcess:
    """Run COMMAND on TARGET, bounded; exit 255 is ssh's own failure."""
    argv = ssh_argv(target, command, options, connect_timeout)
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 255, b"", f"no answer within {timeout:g} s".encode())


def _sections(text: str) -> dict[str, tuple[int, str]]:
    """Split the output of read_script back into {name: (rc, stdout)}."""
    found: dict[str, tuple[int, str]] = {}
    name, lines = None, []
    for line in text.splitlines(keepends=True):
        at = line.find(_MARK + " end ")
        if at > 0 and name is not None:  # output without a final newline (system_profiler's JSON)
            lines.append(line[:at])
            line = line[at:]
        words = line.split()
        if words[:1] == [_MARK] and len(words) > 1:  # a marker line: "MARK name" or "MARK end STATUS"
            if words[1] == "end" and name is not None:
                status = words[2] if len(words) == 3 else ""
                found[name] = (int(status) if status.isascii() and status.isdigit() else 255, "".join(lines))
                name = None
            elif words[1] != "end" and len(words) == 2:
                name, lines = words[1], []
            else:
                name = None  # a mangled marker: the section it closes or opens is not trusted
        elif name is not None:
            lines.append(line)
    return found


def _bounded(command: str, limit: float) -> str:
    """COMMAND given LIMIT seconds (macOS has no timeout(1)): its output goes through a temporary file
    and its status through another, polled, so a process that hangs, even one a kill cannot end, holds
    neither this shell nor the ssh session; exit status 124 then, as timeout(1) says it."""
    ticks = max(1, round(limit / _TICK))
    return (f't=$(mktemp) && {{ ( {command} >"$t" 2>/dev/null; echo $? >"$t.rc" ) >/dev/null 2>&1 & p=$!; i=0; '
            f'while [ ! -s "$t.rc" ] && [ $i -lt {ticks} ]; do sleep {_TICK:g}; i=$((i+1)); done; '
            f'if [ -s "$t.rc" ]; then r=$(cat "$t.rc"); else pkill -9 -P $p; kill -9 $p; r=124; fi; '
            f'cat "$t"; rm -f "$t" "$t.rc"; (exit $r); }} 2>/dev/null')


def read_script(reads: tuple[str, ...], python: str | None, *, bounded: tuple[str, ...] = (), limit: float = 5,
                files: dict[str, str] | None = None, commands: dict[str, list[str]] | None = None,
                first: tuple[str, ...] = ()) -> str:
    """One shell script printing each read as a section. The reads are made at once, each into a file of a
    private temporary folder, and printed in order once all ended; the FIRST ones before the others start (a
    process list, which must not list them). The BOUNDED reads get LIMIT seconds each; FILES (section name ->
    path) are read with cat; COMMANDS (section name -> argv) are reads kept out of macos_commands.READS (a process
    list: private, not the Mac's configuration)."""
    registry = {**macos_commands.READS, **(commands or {})}
    made = []  # (section name, the shell command printing it)
    for name in (*reads, *(commands or {})):
        command = remote_command(registry[name])
        made.append((name, _bounded(command, limit) if name in bounded else f"{command} 2>/dev/null"))
    made += [(name, f"cat {shlex.quote(path)} 2>/dev/null") for name, path in (files or {}).items()]
    if python:
        made.append(("python", f"{shlex.quote(python)} -B -c {shlex.quote(_VERSIONS)} 2>&1"))

    def into(i: int) -> str:
        return f'{{ {made[i][1]}; }} >"$d/{i}"; echo $? >"$d/{i}.rc"'

    # The shell prints the marker, but the script's own text (which a process list read in it shows) holds none.
    mark = _MARK[:-1] + '""' + _MARK[-1]
    return " ".join(["d=$(mktemp -d) || exit 1;",
                     *[into(i) + ";" for i, (name, _) in enumerate(made) if name in first],
                     *[f"( {into(i)} ) &" for i, (name, _) in enumerate(made) if name not in first],
                     "wait;",
                     *[f'echo {mark} {name}; cat "$d/{i}"; echo {mark} end "$(cat "$d/{i}.rc")";'
                       for i, (name, _) in enumerate(made)],
                     'rm -rf "$d"'])


def _node(host: str, result: subprocess.CompletedProcess, python: str | None) -> Node:
    text = result.stdout.decode("utf-8", "replace")
    if result.returncode == 255:
        message = (result.stderr.decode("utf-8", "replace").strip().splitlines() or ["ssh failed"])[-1]
        return Node(host, reachable=False, error=message)
    node = Node(host, reads=_sections(text))
    if "python" in node.reads:
        rc, out = node.reads.pop("python")
        words = out.split()
        if rc == 0 and len(words) == 2:
            node.python, node.mlx = words
        else:
            node.python_error = (out.strip().splitlines() or [f"exit status {rc}"])[-1]
    if result.returncode != 0 and not node.reads:
        node.error = (result.stderr.decode("utf-8", "replace").strip().splitlines()
                      or [f"exit status {result.returncode}"])[-1]
    return node


def probe(targets: list[SshTarget], script: str, connect_timeout: float = CONNECT_TIMEOUT,
          timeout: float = SSH_TIMEOUT) -> dict[str, Node]:
    """SCRIPT (read_script) on every Mac at once, one ssh session each: the watch's round and verify's reads;
    name -> Node. A Mac that does not answer costs CONNECT_TIMEOUT."""
    by_target = {target.name: target for target in targets}
    # A link cut while the session runs: ssh gives up after about the connect timeout, not at TIMEOUT.
    alive = ("-o", f"ServerAliveInterval={max(1, math.ceil(connect_timeout / 2))}", "-o", "ServerAliveCountMax=2")

    def work(name: str) -> Node:
        return _node(name, ssh(by_target[name], script, timeout=timeout, options=alive,
                               connect_timeout=connect_timeout), None)

    return each(list(by_target), work)


def each(hosts: list[str], work) -> dict:
    """WORK(host) for every Mac at once: host -> its result."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(hosts)))) as pool:
        return dict(zip(hosts, pool.map(work, hosts)))


def payload(files: dict[str, bytes]) -> bytes:
    """A tar of the files to stage (name -> content), readable only by the user."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o600
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def stage(hosts: list[str], rundir: str, files: dict[str, bytes], python: str, reads: tuple[str, ...]) -> dict[str, Node]:
    """Make rundir in the admin's home on every Mac and copy files into it, read sw_vers and `reads`,
    check the interpreter runs MLX. The folder is private by construction: made by a plain mkdir (which
    fails on anything already there, a symlink included) with umask 077, in a home that must be the
    admin's own and writable by no one else; a Mac where that does not hold is not staged (exit 3)."""
    folder = shlex.quote(rundir)
    refuse = "echo {} >&2; exit 3".format(shlex.quote(
        f"cannot stage in the home folder: it must be owned by this user and writable by no one else, "
        f"and ~/{rundir} must not exist yet"))
    script = (f"cd && umask 077 && [ -O . ] && [ -z \"$(find . -maxdepth 0 \\( -perm -020 -o -perm -002 \\))\" ] "
              f"&& mkdir {folder} && mkdir {folder}/{RUNNING_DIR} && tar -xf - -C {folder} || {{ {refuse}; }}; "
              f"echo {_MARK} staged; echo {_MARK} end 0; " + read_script(("sw_vers", *reads), python))
    data = payload(files)

    def staged(host: str) -> Node:
        node = _node(host, ssh(by_name(host), script, data), python)
        node.staged = node.reads.pop("staged", None) is not None
        return node
    return each(hosts, staged)


def read(hosts: list[str], reads: tuple[str, ...]) -> dict[str, Node]:
    """The reads again (after a failure: the state the diagnosis should look at)."""
    return probe([by_name(host) for host in hosts], read_script(reads, None))


LEFT = "left "  # stop(check=True): a line of what was still there when looked at again


def stop(hosts: list[str], rundir: str, job: str = "*", remove: bool = False, check: bool = False) -> dict[str, list[str]]:
    """Kill what a job (or every job, "*") still runs on each Mac, the supervisor and its child's whole process
    group, and remove the folder too if asked; host -> "JOB.RANK PID" for each process that had to be killed
    (a group: "-PID"). With CHECK, in the same ssh session a second later, "left JOB.RANK PID" for each of those
    still there and "left PID COMMAND" for each supervisor of the job ps still lists."""
    folder = shlex.quote(rundir)
    pattern = "*" if job == "*" else shlex.quote(job) + ".*"
    script = (f"k=; for f in {folder}/{RUNNING_DIR}/{pattern}; do [ -f \"$f\" ] || continue; "
              f"for p in $(cat \"$f\"); do for t in \"$p\" \"-$p\"; do "
              f"kill -9 \"$t\" 2>/dev/null && echo \"${{f##*/}} $t\" && k=\"$k ${{f##*/}}:$t\"; done; done; "
              f"rm -f \"$f\"; done; " + (f"rm -rf {folder}; " if remove else ""))
    if check:
        supervisors = shlex.quote("--job " + job + " " if job != "*" else "check_program.py supervise")
        # A second for what was killed to go; nothing killed (every rank ended by itself): no wait.
        script += (f"[ -z \"$k\" ] || sleep 1; for e in $k; do kill -0 \"${{e#*:}}\" 2>/dev/null && echo \"{LEFT}${{e%%:*}} ${{e#*:}}\"; "
                   f"done; ps -ax -o pid,command | grep -F -e {supervisors} | grep -v grep | sed 's/^ */{LEFT}/'; ")
    script += "true"
    results = each(hosts, lambda host: ssh(by_name(host), script))
    return {host: r.stdout.decode("utf-8", "replace").split("\n")[:-1] for host, r in results.items()
            if r.returncode == 0 and r.stdout.strip()}


def outputs(hosts: list[str], rundir: str, job: str) -> dict[int, str]:
    """Each rank's own record of a job (check_program's output/JOB.RANK), from the Macs that ran it:
    rank -> its tagged lines. A Mac that does not answer adds nothing."""
    folder = shlex.quote(rundir)
    script = (f"for f in {folder}/{OUTPUT_DIR}/{shlex.quote(job)}.*; do [ -f \"$f\" ] || continue; "
              f"echo \"{_MARK} ${{f##*/}}\"; cat \"$f\"; echo; echo \"{_MARK} end 0\"; done; true")
    records: dict[int, str] = {}
    for result in each(hosts, lambda host: ssh(by_name(host), script)).values():
        if result.returncode != 0:
            continue
        for name, (_, text) in _sections(result.stdout.decode("utf-8", "replace")).items():
            rank = name[len(job) + 1:] if name.startswith(job + ".") else ""
            if rank.isascii() and rank.isdigit():
                records[int(rank)] = text
    return records


def rundir_for(run_id: str, command: str = "verify") -> str:
    """The run's folder on every Mac, relative to the admin's home, where ssh (and so mlx.launch) starts:
    never a shared folder such as /tmp, where another account could make the path first."""
    return f".mlx-fleet-{command}-{run_id}"
