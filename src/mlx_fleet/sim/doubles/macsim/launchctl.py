"""launchctl(1) for the system domain: bootstrap, bootout, print, list, enable, disable,
kickstart. Loaded jobs live in the run directory (a reboot forgets them, and ``boot``
loads /Library/LaunchDaemons again); disabled labels persist, as launchd's own
disabled database does. Errors as real launchctl prints them: 'Could not find service
"L" in domain for system' (exit 113), 'Bootstrap failed: 5: Input/output error' for a
job already loaded, 'Boot-out failed: 3: No such process'.
"""

import os
import pwd
import signal
import sys
import time

from . import state
from .state import Fail, out

DISABLED = "usr/local/libexec/macsim/launchd-disabled.json"


def _job_path(label: str):
    return state.path(f"{state.LIBEXEC}/run/launchd/{label}.json")


def job(label: str) -> dict | None:
    return state.read_json(_job_path(label), None)


def _save(label: str, record: dict) -> None:
    state.write_json(_job_path(label), record)


def _alive(record: dict) -> bool:
    pid = record.get("pid")
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _not_found(label: str) -> Fail:
    return Fail(f'Bad request.\nCould not find service "{label}" in domain for system\n', 113)


def _require_root(verb: str) -> None:
    if not state.is_root():
        raise Fail(f"{verb} failed: 1: Operation not permitted\n", 1)


def disabled() -> dict:
    return state.read_json(state.path(DISABLED), {})


def load(plist_path: str) -> None:
    """bootstrap: record the job as loaded and, if RunAtLoad, start it."""
    import plistlib  # here, as subprocess below: `launchctl print` is one of a probe's reads (state.py)

    try:
        with open(state.path(plist_path.lstrip("/")), "rb") as f:
            plist = plistlib.load(f)
    except (OSError, plistlib.InvalidFileException):
        raise Fail("Bootstrap failed: 5: Input/output error\n", 5) from None
    label = plist.get("Label")
    if not label or not plist.get("ProgramArguments", [plist.get("Program")])[0]:
        raise Fail("Bootstrap failed: 5: Input/output error\n", 5)
    if job(label) is not None:
        raise Fail("Bootstrap failed: 5: Input/output error\n", 5)
    if disabled().get(label):
        raise Fail("Bootstrap failed: 119: Service is disabled\n", 119)
    _save(label, {"label": label, "path": plist_path, "plist": _plain(plist), "runs": 0})
    if plist.get("RunAtLoad"):
        start(label)


def _plain(plist: dict) -> dict:
    """The plist's JSON-representable keys (dates and data have no use here)."""
    return {k: v for k, v in plist.items() if isinstance(v, (str, int, bool, list, dict))}


def start(label: str) -> None:
    """Start the job under a detached supervisor that records its exit status."""
    import subprocess

    subprocess.Popen(
        [sys.executable, os.path.abspath(sys.argv[0]), "_launchd_job", label],
        start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    for _ in range(50):  # launchd reports a pid once spawned; wait for ours to appear
        if (job(label) or {}).get("pid"):
            return
        time.sleep(0.02)


# Where a Mac keeps its own tools (the sealed system volume); a job names them by these paths.
SYSTEM_BIN_DIRS = ("/bin", "/sbin", "/usr/bin", "/usr/sbin")


def _program(path: str) -> str:
    """A macOS tool at its system path (/usr/sbin/sysctl) is the node's double in /usr/local/bin:
    the node shares the Linux host's /usr/sbin, whose sysctl is not the Mac's."""
    directory, name = os.path.split(path)
    double = state.path(f"usr/local/bin/{name}")
    if directory in SYSTEM_BIN_DIRS and os.path.isfile(double):
        with open(double, errors="replace") as shim:
            if "macsim" in shim.read():
                return double
    return path


def supervise(label: str) -> int:
    """The supervisor: run ProgramArguments as launchd would, then record the exit status."""
    import subprocess

    record = job(label)
    plist = record["plist"]
    argv = list(plist.get("ProgramArguments") or [plist["Program"]])
    argv[0] = _program(plist.get("Program") or argv[0])
    user = pwd.getpwnam(plist["UserName"]) if plist.get("UserName") else None

    def stream(key):
        return open(plist[key], "ab") if plist.get(key) else subprocess.DEVNULL

    proc = subprocess.Popen(
        argv,
        cwd=plist.get("WorkingDirectory", "/"),
        env={"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", **plist.get("EnvironmentVariables", {})},
        stdin=subprocess.DEVNULL, stdout=stream("StandardOutPath"), stderr=stream("StandardErrorPath"),
        user=user.pw_uid if user else None, group=user.pw_gid if user else None,
        process_group=0,  # its own group, so bootout and kickstart -k can signal all of it
    )
    record.update(pid=proc.pid, runs=record["runs"] + 1)
    _save(label, record)
    status = proc.wait()
    record = job(label)
    if record is not None:  # still loaded (bootout removes the record)
        record.update(pid=None, last_exit=status)
        _save(label, record)
    return 0


def _label(target: str) -> str:
    if not target.startswith("system/"):
        raise Fail("Unrecognized target specifier.\n", 1)  # only the system domain is simulated
    return target.split("/", 1)[1]


def bootout(args: list[str]) -> None:
    _require_root("Boot-out")
    if args[0] == "system" and len(args) == 2:
        import plistlib

        with open(state.path(args[1].lstrip("/")), "rb") as f:
            label = plistlib.load(f).get("Label", "")
    else:
        label = _label(args[0])
    record = job(label)
    if record is None:
        raise Fail("Boot-out failed: 3: No such process\n", 3)
    os.unlink(_job_path(label))
    if _alive(record):
        os.killpg(record["pid"], signal.SIGTERM)


def print_job(label: str) -> None:
    record = job(label)
    if record is None:
        raise _not_found(label)
    plist = record["plist"]
    argv = plist.get("ProgramArguments") or [plist["Program"]]
    running = _alive(record)
    lines = [
        f"system/{label} = {{",
        "\tactive count = " + ("1" if running else "0"),
        f"\tpath = {record['path']}",
        "\ttype = LaunchDaemon",
        "\tstate = " + ("running" if running else "not running"),
        "",
        f"\tprogram = {argv[0]}",
        "\targuments = {",
        *(f"\t\t{a}" for a in argv),
        "\t}",
        "",
        f"\truns = {record['runs']}",
    ]
    if running:
        lines.append(f"\tpid = {record['pid']}")
    if "last_exit" in record:
        lines.append(f"\tlast exit code = {record['last_exit']}")
    out("\n".join(lines + ["}"]) + "\n")


def list_jobs() -> None:
    text = "PID\tStatus\tLabel\n"
    run_dir = state.path(f"{state.LIBEXEC}/run/launchd")
    for name in sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []:
        record = state.read_json(os.path.join(run_dir, name), {}) if name.endswith(".json") else {}
        if not record:
            continue
        pid = str(record["pid"]) if _alive(record) else "-"
        text += f"{pid}\t{record.get('last_exit', 0)}\t{record['label']}\n"
    out(text)


def set_disabled(label: str, value: bool) -> None:
    _require_root("Disable" if value else "Enable")
    table = disabled()
    table[label] = value
    state.write_json(state.path(DISABLED), table)


def kickstart(args: list[str]) -> None:
    _require_root("Kickstart")
    kill = "-k" in args
    label = _label([a for a in args if not a.startswith("-")][0])
    record = job(label)
    if record is None:
        raise _not_found(label)
    if _alive(record):
        if not kill:
            return  # already running: kickstart without -k leaves it alone
        os.killpg(record["pid"], signal.SIGTERM)
    start(label)


def main(argv: list[str]) -> int:
    if not argv:
        raise Fail("Usage: launchctl <subcommand> ... | help [subcommand]\n", 64)
    verb, args = argv[0], argv[1:]
    if verb == "bootstrap" and len(args) == 2 and args[0] == "system":
        _require_root("Bootstrap")
        load(args[1])
    elif verb == "bootout" and args:
        bootout(args)
    elif verb == "print" and len(args) == 1:
        print_job(_label(args[0]))
    elif verb == "list" and not args:
        list_jobs()
    elif verb in ("enable", "disable") and len(args) == 1:
        set_disabled(_label(args[0]), verb == "disable")
    elif verb == "kickstart" and args:
        kickstart(args)
    else:
        raise Fail(f"Unrecognized subcommand: {verb}\n", 64)
    return 0
