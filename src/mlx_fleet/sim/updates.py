"""macOS updates of the simulated cluster: offers, the restart that installs one, FileVault unlocking."""

from __future__ import annotations

import re
import subprocess
import sys


from mlx_fleet.sim import replay
from mlx_fleet.sim.host import SimError
from mlx_fleet.sim.lifecycle import process_alive
from mlx_fleet.sim.state import LIBEXEC, ClusterState
UNLOCKED_OVER_SSH = "Accepted password for "  # sshd -e's line in the console log
UPDATE_FAULTS = ("no-prepare", "no-return", "filevault-locked", "rdma-off")


class Updates(ClusterState):
    """What Apple's updates and a locked data volume do to a node."""

    def update(self, name: str, os_build: str, os_version: str | None = None, keep_rdma: bool = False,
               bridge_on: bool = False) -> dict:
        """A macOS update: the new version, RDMA switched off (as users report after updates, unless
        `keep_rdma`), the Thunderbolt Bridge service back on if `bridge_on`, and a restart."""
        self._require_up()
        self._require(name)
        if bridge_on:
            self._thunderbolt_bridge_on(name)
        profile = self.profile(name)
        profile["os_build"] = os_build
        profile["os_version"] = os_version or profile["os_version"]
        profile["nvram_rdma"] = profile["nvram_rdma"] and keep_rdma
        self._write_profile(name, profile)
        self.reboot(name)
        return self.profile(name)

    def offer(self, names: list[str], version: str, build: str, faults: dict[str, str],
              prepare_seconds: float) -> list[str]:
        """Apple offers macOS VERSION (BUILD) to NAMES (every node when empty), as `softwareupdate
        --list` shows it; FAULTS {node: fault} rehearse an update that goes wrong there. Starts the
        power agent that restarts a node when its preparation is done."""
        self._require_up()
        names = names or self.node_names()
        for name in [*names, *faults]:
            self._require(name)
        for name, fault in faults.items():
            if fault not in UPDATE_FAULTS:
                raise SimError(f"--fault {name}={fault}: the faults are {', '.join(UPDATE_FAULTS)}")
            if name not in names:
                raise SimError(f"--fault {name}=...: {name} is not offered the update")
        for name in names:
            profile = self.profile(name)
            codename = "Tahoe" if version.split(".")[0] == "26" else "macOS"
            title = f"macOS {codename} {version}"
            update = {"label": f"{title}-{build}", "title": title, "version": version, "build": build,
                      "size_kib": 2630358, "action": "restart"}
            others = [u for u in profile.get("software_updates", []) if not u.get("build")]
            profile.update(software_updates=others + [update], update_fault=faults.get(name),
                           update_prepare_seconds=prepare_seconds)
            self._write_profile(name, profile)
            replay.forget(self.fs(name), LIBEXEC, "softwareupdate")  # the double answers from the offer now
        self._start_power_agent()
        return names

    def _start_power_agent(self) -> None:
        if process_alive(self.state.get("power_agent")):
            return
        log = open(self.dir / "power-agent.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "mlx_fleet.sim.power", str(self.dir)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.state["power_agent"] = proc.pid
        self._save()

    def install_update(self, name: str, update: dict) -> None:
        """The restart at the end of a preparation: the node boots into the new build, or as its
        fault says (off for good, FileVault-locked, RDMA off)."""
        profile = self.profile(name)
        fault = profile.get("update_fault")
        profile.update(os_version=update["version"], os_build=update["build"], update_fault=None,
                       filevault_locked="console" if fault == "filevault-locked" else (
                           "ssh-unlock" if profile.get("filevault") else False),
                       software_updates=[u for u in profile.get("software_updates", []) if u["label"] != update["label"]])
        if fault == "rdma-off":
            profile["nvram_rdma"] = False
        self._write_profile(name, profile)
        replay.forget(self.fs(name), LIBEXEC, "softwareupdate")
        self._stop(name)
        self._forget_runtime_state(name)
        self._refresh_links()
        if fault == "no-return":
            self._save()
            return
        self._start(name)
        self._wait_for_ssh(name)

    def unlocked_over_ssh(self, name: str) -> bool:
        """A password login reached the locked Mac's sshd (what unlocks the data volume since macOS 26)."""
        profile = self.profile(name)
        console = self.dir / "nodes" / name / "console.log"
        if profile.get("filevault_locked") != "ssh-unlock" or not console.exists():
            return False
        with open(console, "rb") as log:
            log.seek(profile.get("locked_log_offset", 0))
            return UNLOCKED_OVER_SSH.encode() in log.read()

    def unlock(self, name: str) -> None:
        """A person logs in at the FileVault login window: the data volume unlocks and the Mac starts up."""
        self._require_up()
        profile = self.profile(name)
        if not profile.get("filevault_locked"):
            raise SimError(f"{name} is not waiting at the FileVault login window")
        profile["filevault_locked"] = False
        self._write_profile(name, profile)
        self.reboot(name)

    def _thunderbolt_bridge_on(self, name: str) -> None:
        """Enable the bridge0 service, or make it again if someone removed it (as configd would)."""
        order = self._node_run(name, ["networksetup", "-listnetworkserviceorder"])
        service = next((m.group(1) for m in re.finditer(r"^\(\S+\) (.+)\n\(Hardware Port: .+, Device: bridge0\)$",
                                                         order, re.M)), None)
        if service is None:
            service = "Thunderbolt Bridge"
            self._node_run(name, ["networksetup", "-createnetworkservice", service, service])
        self._node_run(name, ["networksetup", "-setnetworkserviceenabled", service, "on"])
