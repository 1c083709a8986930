"""A person at a simulated Mac: its console (root or a local account), Recovery, pip, and `sim set`."""

from __future__ import annotations

import pwd
import subprocess
from pathlib import Path


from mlx_fleet.sim import host
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.lifecycle import CONSOLE_ENV, process_alive
from mlx_fleet.sim.state import PRIVATE_DIRS, ClusterState
SETTABLE = {
    "os_version": str, "os_build": str, "memory_gb": int, "serial": str,
    "os_version_extra": lambda v: v or None,  # "(a)": a security response applied ("" none)
    "clt_installed": lambda v: v.lower() in ("1", "true", "yes"),
    "apple_silicon": lambda v: v.lower() in ("1", "true", "yes"),
    "chip": str, "model_name": str, "model_id": str,
    "sudo": str,
    # What the RDMA tools print instead of their usual text ("" goes back to it): a wording no real Mac has
    # shown yet, to rehearse how the toolkit takes it. "\n" in the value is a line break.
    "rdma_ctl_status_output": lambda v: v.replace("\\n", "\n") or None,
    "ibv_devices_output": lambda v: v.replace("\\n", "\n") or None,
    "filevault": lambda v: v.lower() in ("1", "true", "yes"),  # on: an update's restart comes back locked
    # The RDMA stack wedged, as users report after hours of jobs: ibv_devinfo hangs until a restart.
    "rdma_wedged": lambda v: v.lower() in ("1", "true", "yes"),
}


class Console(ClusterState):
    """Commands run in a node's namespaces, not over SSH."""

    def pip(self, name: str, env: str, pip_args: list[str]) -> int:
        """`pip` of the Python environment `env` on the node, run by the environment's owner, offline
        (the sim has no index to reach): what someone installing a package by hand does."""
        self._require_up()
        self._require(name)
        try:
            uid, gid = self._node_run(name, ["stat", "-c", "%u %g", f"{env}/bin/python"]).split()
        except SimError:
            raise SimError(f"no Python environment at {env} on {name}; give its folder with --env") from None
        args = []
        for arg in pip_args:  # the node sees the host's files, except its own private folders
            path = Path(arg)
            if not arg.startswith("-") and path.exists():
                path = path.resolve()
                if any(path.is_relative_to("/" + d) for d in PRIVATE_DIRS):
                    raise SimError(f"{path} is hidden by {name}'s own disk; copy it to a shared folder such as /var/tmp")
                arg = str(path)
            args.append(arg)
        home = self._node_run(name, ["getent", "passwd", uid]).split(":")[5]
        # The node's own pip drives the environment's Python (`--python`): environments made with
        # `uv venv`, as mlx_env makes them, have no pip of their own.
        command = _as_user(uid, gid, ["/usr/bin/python3", "-m", "pip", "--python", f"{env}/bin/python", *args])
        offline = {"HOME": home, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}
        return subprocess.run(self._console_argv(name, command, env=offline)).returncode

    def recovery(self, name: str, command: list[str]) -> int:
        """Boot NAME into macOS Recovery and run a Terminal command there, as the person at the Mac would.

        The node stays in Recovery (off the network) until `sim reboot`.
        """
        self._require_up()
        self._require(name)
        if not command:
            raise SimError("give the Recovery Terminal command after --, e.g. -- rdma_ctl enable")
        self._stop(name)
        profile = self.profile(name)
        profile["in_recovery"] = True
        self._write_profile(name, profile)
        self.state["nodes"][name]["status"] = "recovery"
        self._save()
        return self._spawn(name, command).wait()

    def exec(self, name: str, command: list[str], user: str | None = None) -> int:
        """Run a command on the node's console (its namespaces), not over SSH: as root, or as a local
        account logged in at the Mac (`user`, with its home)."""
        self._require_up()
        self._require(name)
        env = None
        if user:
            try:
                entry = pwd.getpwnam(user)
            except KeyError:
                raise SimError(f"no local account {user!r} on {name}; the sim's are {host.ADMIN_USER} and "
                               f"{host.OTHER_USER}") from None
            command, env = _as_user(entry.pw_uid, entry.pw_gid, command), {"HOME": entry.pw_dir, "USER": user}
        return subprocess.run(self._console_argv(name, command, env=env)).returncode

    def _console_argv(self, name: str, command: list[str], env: dict | None = None) -> list[str]:
        node = self.state["nodes"][name]
        if node["status"] != "running" or not process_alive(node.get("pid")):
            raise SimError(f"{name} is not running (status: {node['status']}); try: mlx-fleet sim reboot {name}")
        # The node's console environment, not the caller's (whose PIP_*, PYTHON* a Mac would not have).
        variables = [f"{k}={v}" for k, v in {**CONSOLE_ENV, **(env or {})}.items()]
        return ["nsenter", "-t", str(node["pid"]), "-n", "-m", "-u", "--", "/usr/bin/env", "-i", *variables, *command]

    def _node_run(self, name: str, command: list[str]) -> str:
        """Run a command as root on the node's console; its output, or a SimError."""
        return run(self._console_argv(name, command)).stdout

    def set(self, name: str, assignments: list[str]) -> dict:
        self._require_up()
        self._require(name)
        profile = self.profile(name)
        for item in assignments:
            key, sep, value = item.partition("=")
            if not sep or key not in SETTABLE:
                raise SimError(f"set takes KEY=VALUE with KEY one of {', '.join(SETTABLE)}; got {item!r}")
            profile[key] = SETTABLE[key](value)
            if key == "sudo":
                self._write_sudoers(name, value)
        self._write_profile(name, profile)
        return profile


def _as_user(uid, gid, command: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", *command]
