"""`mlx-fleet watch --install` / `--uninstall`: keep the watch running on the controller as a service.

A Mac controller gets a LaunchAgent (~/Library/LaunchAgents, `launchctl bootstrap gui/UID`), a Linux one
a systemd unit (`systemctl --user` for a user, a system unit for root). The service runs one long-lived
`mlx-fleet watch -i INV --every N`, not a timer firing `--once`: the watch keeps the last round in memory,
so each change is said (and sent to --on-change) once, where `--once` every N seconds would repeat every
standing finding each round; the service manager restarts it if it ends (docs/watch.md).
"""

from __future__ import annotations

import os
import platform
import plistlib
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text
from mlx_fleet.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, UserError

LABEL = "io.github.mlx-fleet.watch"  # launchd job label
UNIT = "mlx-fleet-watch.service"     # systemd unit name
RESTART_SECONDS = 30                  # how soon a watch that ended is started again
SERVICE_TIMEOUT = 30                  # seconds a launchctl/systemctl call may take


def watch_argv(executable: str, args) -> list[str]:
    """The command line the service runs: absolute paths, the user's watch options carried over."""
    argv = [executable, "watch"]
    for inventory in args.inventory:
        argv += ["-i", str(Path(inventory).resolve())]
    argv += ["--every", f"{args.every:g}"]
    for option, value in (("--output-dir", args.output_dir), ("--out", args.out)):
        if value:
            argv += [option, str(Path(value).resolve())]
    if args.on_change:
        argv += ["--on-change", args.on_change]
    argv += ["--connect-timeout", f"{args.connect_timeout:g}", "--rdma-timeout", f"{args.rdma_timeout:g}"]
    return argv


def executable() -> str:
    """The absolute path of this mlx-fleet (the service has no PATH of the user's shell)."""
    found = shutil.which("mlx-fleet")
    if not found:
        raise UserError("watch --install: the mlx-fleet command is not on PATH; install it (uv tool install "
                        "mlx-fleet) or activate its venv, then run this again")
    return os.path.abspath(found)


# --- launchd -----------------------------------------------------------------------------------------------

def render_plist(argv: list[str], log: Path, path_env: str) -> bytes:
    return plistlib.dumps({
        "Label": LABEL,
        "ProgramArguments": argv,
        "RunAtLoad": True,
        # Restart it when it ends with a failure, at most every RESTART_SECONDS (launchd's throttle).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": RESTART_SECONDS,
        "ProcessType": "Background",
        "EnvironmentVariables": {"PATH": path_env},
        "StandardOutPath": str(log),
        "StandardErrorPath": str(log),
    })


# --- systemd -----------------------------------------------------------------------------------------------

def systemd_quote(word: str) -> str:
    """One ExecStart word as systemd reads it: double quotes with C escapes; % and $ doubled (its specifiers
    and variables)."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def render_unit(argv: list[str], user: bool) -> str:
    return "\n".join([
        "[Unit]",
        "Description=mlx-fleet watch: the MLX cluster's cables, Macs, bridge and RDMA between runs",
        "Documentation=https://github.com/mlx-fleet/mlx-fleet/blob/main/docs/watch.md",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(systemd_quote(w) for w in argv),
        "Restart=on-failure",
        f"RestartSec={RESTART_SECONDS}",
        f"SuccessExitStatus={EXIT_INTERRUPTED}",
        f"RestartPreventExitStatus={EXIT_BAD_INPUT}",
        "",
        "[Install]",
        f"WantedBy={'default.target' if user else 'multi-user.target'}",
        "",
    ])


def parse_unit(text: str) -> dict[str, dict[str, str]]:
    """A unit file's sections and keys (the last value of a key wins, as systemd reads single-valued keys)."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
        elif "=" in line and current is not None:
            key, value = line.split("=", 1)
            current[key.strip()] = value.strip()
        else:
            raise ValueError(f"not a unit file line: {line!r}")
    return sections


@dataclass
class Host:
    """Where the service goes on this controller: injectable so a test installs into a folder of its own."""
    system: str          # "Darwin" or "Linux"
    folder: Path         # ~/Library/LaunchAgents, ~/.config/systemd/user or /etc/systemd/system
    manager: list[str]   # ["launchctl"], ["systemctl", "--user"] or ["systemctl"]
    uid: int
    log: Path | None = None

    @classmethod
    def here(cls) -> "Host":
        system, uid, home = platform.system(), os.getuid(), Path.home()
        if system == "Darwin":
            return cls(system, home / "Library/LaunchAgents", ["launchctl"], uid,
                       home / "Library/Logs/mlx-fleet-watch.log")
        if system == "Linux":
            if uid == 0:
                return cls(system, Path("/etc/systemd/system"), ["systemctl"], uid)
            config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
            return cls(system, config / "systemd/user", ["systemctl", "--user"], uid)
        raise UserError(f"watch --install knows launchd (macOS) and systemd (Linux), not {system}; run "
                        "mlx-fleet watch -i INVENTORY under your own service manager")

    @property
    def file(self) -> Path:
        return self.folder / (f"{LABEL}.plist" if self.system == "Darwin" else UNIT)

    @property
    def user(self) -> bool:
        return self.manager[-1] == "--user"

    def run(self, *words: str, ok_to_fail: bool = False) -> subprocess.CompletedProcess:
        argv = [*self.manager, *words]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=SERVICE_TIMEOUT)
        except FileNotFoundError:
            raise UserError(f"watch: {self.manager[0]} not found; is this controller running "
                            f"{'launchd' if self.system == 'Darwin' else 'systemd'}?") from None
        except subprocess.TimeoutExpired:
            raise UserError(f"watch: {' '.join(argv)} did not answer within {SERVICE_TIMEOUT} s") from None
        if done.returncode and not ok_to_fail:
            why = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[-1]
            raise UserError(f"watch: {' '.join(argv)} failed: {why}")
        return done


def _write_private(path: Path, text: str, check=None) -> bool:
    """The service file, 0600: it holds the --on-change command, often a webhook URL with its token. One an
    earlier version wrote 0644 with the same text is made 0600 too (and counts as written)."""
    if atomic_write_text(path, text, check=check, mode=0o600):
        return True
    if stat.S_IMODE(path.stat().st_mode) == 0o600:
        return False
    path.chmod(0o600)
    return True


def install(args, host: Host | None = None) -> int:
    host = host or Host.here()
    argv = watch_argv(executable(), args)
    host.folder.mkdir(parents=True, exist_ok=True)
    if host.system == "Darwin":
        domain = f"gui/{host.uid}"
        host.log.parent.mkdir(parents=True, exist_ok=True)
        path_env = os.pathsep.join([str(Path(argv[0]).parent), "/usr/bin", "/bin", "/usr/sbin", "/sbin"])
        written = _write_private(host.file, render_plist(argv, host.log, path_env).decode())
        host.run("bootout", f"{domain}/{LABEL}", ok_to_fail=True)  # not loaded yet is fine
        host.run("bootstrap", domain, str(host.file))
        look = [f"launchctl print {domain}/{LABEL}", f"tail -f {host.log}"]
    else:
        written = _write_private(host.file, render_unit(argv, host.user), check=parse_unit)
        host.run("daemon-reload")
        host.run("enable", UNIT)
        host.run("restart", UNIT)  # starts it, or starts the new command line if it ran already
        manager = " ".join(host.manager)
        journal = "journalctl --user" if host.user else "journalctl"
        look = [f"{manager} status {UNIT}", f"{journal} -u {UNIT} -f"]
        if host.user:
            look.append("loginctl enable-linger   # once, so the watch keeps running after you log out")
    print(f"watch --install: {'wrote' if written else 'kept (unchanged)'} {host.file}")
    print(f"  runs: {' '.join(argv)}")
    print("  look at it: " + "\n              ".join(look))
    print("result: installed (exit 0)")
    return EXIT_OK


def uninstall(host: Host | None = None) -> int:
    host = host or Host.here()
    if host.system == "Darwin":
        host.run("bootout", f"gui/{host.uid}/{LABEL}", ok_to_fail=True)  # not loaded is fine
    elif host.file.exists():
        host.run("disable", "--now", UNIT, ok_to_fail=True)
    existed = host.file.exists()
    host.file.unlink(missing_ok=True)
    if host.system != "Darwin" and existed:
        host.run("daemon-reload")
    print(f"watch --uninstall: {'removed' if existed else 'nothing installed at'} {host.file}")
    print("result: uninstalled (exit 0)")
    return EXIT_OK
