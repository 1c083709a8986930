"""A simulated Mac's power: start (boot, then Remote Login), wait for it, stop, reboot."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path


from mlx_fleet.sim.accounts import SSHD_LOCKED
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.state import LIBEXEC, ClusterState, rmtree
NODE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
CONSOLE_ENV = {"PATH": NODE_PATH, "HOME": "/var/root", "LANG": "C.UTF-8"}  # root at the node's console
# Runs in the node's fresh namespaces: mount its private disk, then become the Mac.
# $1 fs root, $2 hostname, then the command to exec (the boot+sshd chain, or a Recovery command).
_NODE_INIT = r"""
set -e
fs=$1; name=$2; shift 2
for d in opt usr/local Library Users etc/sudoers.d etc/hosts etc/group; do mount --bind "$fs/$d" "/$d"; done
if [ -e "$fs/etc/shadow" ]; then mount --bind "$fs/etc/shadow" /etc/shadow; fi
install -d -m 1777 "$fs/tmp"  # sticky and world-writable, as /tmp is (made here for older clusters too)
mount --bind "$fs/tmp" /tmp  # last: the node's disk may itself be under the host's /tmp
mount -t tmpfs -o mode=755 macsim-run /run
mkdir -p /run/sshd
/bin/hostname "$name"
/sbin/ip link set lo up
exec "$@"
"""
_BOOT = "/usr/local/libexec/macsim/boot"
_BOOT_THEN_SSHD = _BOOT + " && exec /usr/sbin/sshd -D -e -f /usr/local/libexec/macsim/ssh/sshd_config"
# FileVault locked at the login window: the data volume (keys, launchd jobs) is unavailable. Since macOS 26 a
# password login over SSH unlocks it (apple_ssh_and_filevault(7): no session, SSH drops briefly, then everything
# starts): profile "filevault_locked" "ssh-unlock". Where that is off ("console"), no login works until a person
# logs in at the Mac.
_LOCKED_SSHD = _BOOT + " && exec /usr/sbin/sshd -D -e -f /usr/local/libexec/macsim/ssh/sshd_config_locked{suffix}"


class Lifecycle(ClusterState):
    """Power on, power off and restart nodes."""

    def _spawn(self, name: str, command: list[str], **popen) -> subprocess.Popen:
        argv = ["ip", "netns", "exec", self.ns(name), "unshare", "--mount", "--uts", "--propagation", "private",
                "--", "/bin/sh", "-c", _NODE_INIT, "macsim-init", str(self.fs(name)), name, *command]
        return subprocess.Popen(argv, env=CONSOLE_ENV, **popen)

    def _start(self, name: str, resume: bool = False) -> None:
        """Power on: boot, then Remote Login; `resume`: as restored from a snapshot, without booting again."""
        node = self._require(name)
        log = open(self.dir / "nodes" / name / "console.log", "ab")
        profile = self.profile(name)
        locked = profile.get("filevault_locked")
        if locked:  # where the agent looks for the unlocking login
            console = self.dir / "nodes" / name / "console.log"
            profile["locked_log_offset"] = console.stat().st_size if console.exists() else 0
            self._write_profile(name, profile)
        command = _LOCKED_SSHD.format(suffix=SSHD_LOCKED[locked][0]) if locked else _BOOT_THEN_SSHD
        if resume:
            command = command.replace(_BOOT, _BOOT + " --resume", 1)
        proc = self._spawn(name, ["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                           stdout=log, stderr=log, start_new_session=True)
        log.close()
        node.update(pid=proc.pid, status="running")
        self._save()

    def _wait_for_ssh(self, name: str, timeout: float = 20.0) -> None:
        """Until the node's sshd listens (Remote Login is on), whatever its network links do."""
        node = self.state["nodes"][name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _listening(node.get("pid"), 22):
                return
            if not process_alive(node.get("pid")):
                break
            time.sleep(0.1)
        tail = (self.dir / "nodes" / name / "console.log").read_text(errors="replace")[-2000:]
        raise SimError(f"{name} did not come up (Remote Login not listening); console:\n{tail}")

    def _stop(self, name: str) -> None:
        """Power off: every process of the node ends; its mount namespace goes with them."""
        ns = self.ns(name)
        for _ in range(50):
            pids = [int(p) for p in run(["ip", "netns", "pids", ns], check=False).stdout.split()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        node = self.state["nodes"][name]
        if node.get("pid"):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(node["pid"], os.WNOHANG)
        node.update(pid=None, status="off")

    def _flush_network(self, name: str) -> None:
        """Every address and route of the node (set with ifconfig/route, or by its boot)."""
        ns = self.ns(name)
        links = json.loads(run(["ip", "-n", ns, "-j", "link", "show"]).stdout)
        for link in links:
            if link["ifname"] != "lo":
                run(["ip", "-n", ns, "addr", "flush", "dev", link["ifname"]])
        run(["ip", "-n", ns, "route", "flush", "table", "main"], check=False)

    def _forget_runtime_state(self, name: str) -> None:
        """What a reboot loses: addresses and routes set with ifconfig/route, sysctl -w values, /tmp."""
        self._flush_network(name)
        for folder in (self.fs(name) / LIBEXEC / "run", self.fs(name) / "tmp"):
            for child in folder.iterdir() if folder.is_dir() else ():
                child.unlink() if not child.is_dir() else rmtree(child)
        profile = self.profile(name)
        profile["rdma_enabled"] = profile["nvram_rdma"]
        profile["in_recovery"] = False
        self._write_profile(name, profile)

    def reboot(self, name: str) -> None:
        self._require_up()
        self._require(name)
        self._stop(name)
        self._forget_runtime_state(name)
        profile = self.profile(name)
        if profile.pop("rdma_wedged", None) is not None:  # a restart is what unwedges RDMA
            self._write_profile(name, profile)
        self._refresh_links()
        self._start(name)
        self._wait_for_ssh(name)


def process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _listening(pid: int | None, port: int) -> bool:
    """Whether a TCP socket listens on `port` in the network namespace of process `pid`."""
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return False
        # "sl local_address rem_address st ...": local "0100007F:0016", st 0A = LISTEN
        if any(f[1].endswith(f":{port:04X}") and f[3] == "0A" for f in (line.split() for line in lines)):
            return True
    return False
