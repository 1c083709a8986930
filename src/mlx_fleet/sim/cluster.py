"""macsim's controller: build, change and remove a simulated Mac cluster.

The layout on the host (see docs/macsim.md):
- node NAME is network namespace `mfs<K>-NAME`, whose first process is its sshd,
  started inside a private mount and UTS namespace that bind-mounts the node's
  own /opt, /usr/local, /Library, /Users and /etc/sudoers.d from DIR/nodes/NAME/fs;
- its management interface (en0) is a veth to the bridge `mfs<K>br` (10.213.K.1/24);
- each Thunderbolt port enX is a veth whose far end waits in the patch-panel
  namespace `mfs<K>-patch`; a cable is a bridge there joining two far ends, so
  an unplugged port has no carrier and a cable carries traffic between exactly
  the two ports it joins.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import yaml

from mlx_fleet.cableplan import Cable, CablePlanError, Port, parse_cable, parse_cables, parse_port
from mlx_fleet.sim import host
from mlx_fleet.sim.doubles import install_doubles
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.layout import Layout
from mlx_fleet.sim import replay
from mlx_fleet.sim.models import make_profile

DROP_IN_DIR = Path("/etc/ssh/ssh_config.d")
NODE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
LIBEXEC = "usr/local/libexec/macsim"
PRIVATE_DIRS = ("opt", "usr/local", "Library", "Users", "etc/sudoers.d")  # and the files etc/hosts, etc/group
SETTABLE = {
    "os_version": str, "os_build": str, "memory_gb": int, "serial": str,
    "clt_installed": lambda v: v.lower() in ("1", "true", "yes"),
    "apple_silicon": lambda v: v.lower() in ("1", "true", "yes"),
    "chip": str, "model_name": str, "model_id": str,
    "sudo": str,
}
SUDO_MODES = ("nopasswd", "password", "none")
# The MLX environment the simulated Macs are given: their own Python (the sim cannot
# download uv-managed CPython builds) on Linux, from a lock committed for the sim.
SIM_ENV_LOCK = Path(__file__).with_name("mlx-env.lock.json")

# Runs in the node's fresh namespaces: mount its private disk, then become the Mac.
# $1 fs root, $2 hostname, then the command to exec (the boot+sshd chain, or a Recovery command).
_NODE_INIT = r"""
set -e
fs=$1; name=$2; shift 2
for d in opt usr/local Library Users etc/sudoers.d etc/hosts etc/group; do mount --bind "$fs/$d" "/$d"; done
mount -t tmpfs -o mode=755 macsim-run /run
mkdir -p /run/sshd
/bin/hostname "$name"
/sbin/ip link set lo up
exec "$@"
"""
_BOOT_THEN_SSHD = (
    "/usr/local/libexec/macsim/boot && "
    "exec /usr/sbin/sshd -D -e -f /usr/local/libexec/macsim/ssh/sshd_config"
)


class Cluster:
    def __init__(self, sim_dir: str | Path):
        self.dir = Path(sim_dir).resolve()
        self.state_path = self.dir / "state.json"
        self.state = json.loads(self.state_path.read_text()) if self.state_path.exists() else None

    # ---- names and paths ---------------------------------------------------------
    @property
    def index(self) -> int:
        return self.state["index"]

    @property
    def prefix(self) -> str:
        return f"mfs{self.index}"

    def ns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    @property
    def patch_ns(self) -> str:
        return f"{self.prefix}-patch"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def fs(self, name: str) -> Path:
        return self.dir / "nodes" / name / "fs"

    def _rank(self, name: str) -> int:
        return self.state["nodes"][name]["rank"]

    def _patch_end(self, port: Port) -> str:
        return f"m{self.index}n{self._rank(port.host)}p{port.number}"

    def _cable_bridge(self, cable: Cable) -> str:
        low = cable.key[0]
        return f"c{self._rank(low.host)}p{low.number}"

    def node_names(self) -> list[str]:
        return sorted(self.state["nodes"], key=self._rank)

    def _require(self, name: str) -> dict:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir} (run: mlx-fleet sim up --dir {self.dir})")
        if name not in self.state["nodes"]:
            raise SimError(f"no node {name!r} in {self.dir}; nodes: {', '.join(self.node_names())}")
        return self.state["nodes"][name]

    def _save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        tmp.replace(self.state_path)

    def profile(self, name: str) -> dict:
        return json.loads((self.fs(name) / LIBEXEC / "node.json").read_text())

    def _write_profile(self, name: str, profile: dict) -> None:
        path = self.fs(name) / LIBEXEC / "node.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(profile, indent=2))
        tmp.chmod(0o644)
        tmp.replace(path)

    # ---- up ----------------------------------------------------------------------
    def up(self, layout: Layout, seed: int = 0) -> None:
        host.require_host_tools()
        if self.state:
            raise SimError(f"a simulated cluster is already up in {self.dir}; run 'mlx-fleet sim down --dir {self.dir}' first")
        for name in layout.models:
            if len(name) > 40 or not name.replace("-", "").isalnum():
                raise SimError(f"node name {name!r}: use letters, digits and '-' only")
        self.dir.mkdir(parents=True, exist_ok=True)
        with host.registry_lock():
            index = host.claim_index(self.dir)
            # Recorded before anything is made, so `down` can clean up a failed `up`.
            self.state = {
                "index": index, "seed": seed, "cables": [],
                "nodes": {name: {"rank": i, "model": m.key, "status": "off"} for i, (name, m) in enumerate(layout.models.items())},
            }
            self._save()
            password = host.acquire_shared_resources()
        try:
            self._build(layout, seed, password)
        except BaseException:
            self.down()
            raise

    def _build(self, layout: Layout, seed: int, password: str) -> None:
        net = f"10.213.{self.index}"
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        run(["ip", "addr", "add", f"{net}.1/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        run(["ip", "netns", "add", self.patch_ns])
        self._write_client_key()
        (self.dir / "admin_password").write_text(password + "\n")
        (self.dir / "admin_password").chmod(0o600)
        profiles = {}
        for name, model in layout.models.items():
            rank = self._rank(name)
            profiles[name] = make_profile(
                name, model, seed=seed, management_ip=f"{net}.{11 + rank}", management_prefix=24,
                router=f"{net}.1", rdma_enabled=layout.rdma.get(name, True),
            )
            if name in layout.replays:  # a real Mac's capture: its recorded hardware
                replay.apply(profiles[name], layout.replays[name])
            self.state["nodes"][name]["management_ip"] = profiles[name]["management"]["ip"]
        cables = replay.merge_cables(layout.cables, replay.implied_cables(layout.replays, profiles),
                                     {name: _port_count(p) for name, p in profiles.items()})
        for name, profile in profiles.items():
            self._make_node(name, profile)
            if name in layout.replays:
                replay.install(layout.replays[name].recording, self.fs(name), LIBEXEC)
        self.state["cables"] = [str(c) for c in cables]
        for cable in cables:
            self._connect(cable)
        self._refresh_links()
        for name in layout.models:
            self._start(name)
        self._save()
        self._write_access_files()
        for name in layout.models:
            self._wait_for_ssh(name)

    def _write_client_key(self) -> None:
        key = self.dir / "id_ed25519"
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mlx-fleet-sim@{self.dir}", "-f", str(key)])

    def _make_node(self, name: str, profile: dict) -> None:
        ns, fs, rank = self.ns(name), self.fs(name), self._rank(name)
        uid, gid = host.admin_ids()
        for d in PRIVATE_DIRS + ("usr/local/bin", f"{LIBEXEC}/run", f"{LIBEXEC}/ssh", "Library/LaunchDaemons",
                                 "Library/Preferences/SystemConfiguration"):
            (fs / d).mkdir(parents=True, exist_ok=True)
        for d in fs.rglob("*"):
            if d.is_dir():
                d.chmod(0o755)
        fs.chmod(0o755)
        # The Mac's own name resolves (mDNS does it on macOS), so sudo does not complain.
        (fs / "etc/hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\t{name} {name}.local\n")
        home = fs / "Users" / host.ADMIN_USER
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "authorized_keys").write_text((self.dir / "id_ed25519.pub").read_text())
        for path, mode in ((home, 0o750), (home / ".ssh", 0o700), (home / ".ssh" / "authorized_keys", 0o600)):
            os.chown(path, uid, gid)
            path.chmod(mode)
        self._write_sudoers(name, profile["sudo"])
        install_doubles(fs)
        self._write_profile(name, profile)
        ssh_dir = fs / LIBEXEC / "ssh"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(ssh_dir / "ssh_host_ed25519_key")])
        (ssh_dir / "sshd_config").write_text(_sshd_config(profile["management"]["ip"]))

        run(["ip", "netns", "add", ns])
        mgmt = profile["management"]
        host_end = f"m{self.index}n{rank}e"
        run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", mgmt["device"], "netns", ns])
        run(["ip", "link", "set", host_end, "master", self.bridge, "up"])
        macs = {i["device"]: i["mac"] for i in profile["interfaces"]}
        run(["ip", "-n", ns, "link", "set", mgmt["device"], "address", macs[mgmt["device"]]])
        tb_devices = {p["device"] for p in profile["thunderbolt"]}
        for iface in profile["interfaces"]:
            device = iface["device"]
            if device == mgmt["device"] or device in tb_devices:
                continue
            # Wi-Fi or another Ethernet: present but connected to nothing, so inactive
            far = f"m{self.index}n{rank}{device}"
            run(["ip", "-n", ns, "link", "add", device, "address", iface["mac"],
                 "type", "veth", "peer", "name", far, "netns", self.patch_ns])
        run(["ip", "-n", ns, "link", "add", "bridge0", "address", profile["bridge_mac"], "type", "bridge"])
        for port in profile["thunderbolt"]:
            far = self._patch_end(Port(name, port["receptacle"]))
            run(["ip", "-n", ns, "link", "add", port["device"], "address", macs[port["device"]],
                 "type", "veth", "peer", "name", far, "netns", self.patch_ns])

    def _write_sudoers(self, name: str, mode: str) -> None:
        """Sudo as on a Mac: members of `admin` may sudo with their password; `nopasswd` adds
        the drop-in users write for unattended work; `none` is a standard (non-admin) account."""
        if mode not in SUDO_MODES:
            raise SimError(f"sudo must be one of {', '.join(SUDO_MODES)}, not {mode!r}")
        fs = self.fs(name)
        # Sorted first: on a Mac this rule is in /etc/sudoers, before every drop-in.
        macos_rule = fs / "etc/sudoers.d/00-macos-admin-group"
        macos_rule.write_text("%admin ALL = (ALL) ALL\n")
        macos_rule.chmod(0o440)
        nopasswd = fs / "etc/sudoers.d/admin-nopasswd"
        if mode == "nopasswd":
            nopasswd.write_text(f"{host.ADMIN_USER} ALL=(ALL) NOPASSWD: ALL\n")
            nopasswd.chmod(0o440)
        else:
            nopasswd.unlink(missing_ok=True)
        # The node's /etc/group: the host's, plus the groups every Mac has. Written in place,
        # because the running node has this very file bind-mounted.
        members = host.ADMIN_USER if mode != "none" else ""
        groups = [line for line in Path("/etc/group").read_text().splitlines()
                  if line.split(":")[0] not in ("admin", "wheel")]
        with open(fs / "etc/group", "w") as group_file:
            group_file.write("\n".join(groups + [f"admin:x:80:{members}", "wheel:x:0:root"]) + "\n")

    # ---- cables -------------------------------------------------------------------
    def _connect(self, cable: Cable) -> None:
        br = self._cable_bridge(cable)
        run(["ip", "-n", self.patch_ns, "link", "add", br, "type", "bridge"])
        run(["ip", "-n", self.patch_ns, "link", "set", br, "up"])
        for end in (cable.a, cable.b):
            far = self._patch_end(end)
            run(["ip", "-n", self.patch_ns, "link", "set", far, "master", br, "up"])

    def _disconnect(self, cable: Cable) -> None:
        for end in (cable.a, cable.b):
            run(["ip", "-n", self.patch_ns, "link", "set", self._patch_end(end), "nomaster", "down"])
        run(["ip", "-n", self.patch_ns, "link", "del", self._cable_bridge(cable)])

    def cables(self) -> list[Cable]:
        return [parse_cable(c) for c in self.state["cables"]]

    def _refresh_links(self) -> None:
        """Rewrite every node's view of its ports from the cables (what system_profiler reports)."""
        profiles = {name: self.profile(name) for name in self.state["nodes"]}
        ports = {(name, p["receptacle"]): p for name, prof in profiles.items() for p in prof["thunderbolt"]}
        for port in ports.values():
            port["link"] = None
        for cable in self.cables():
            options = self.state.get("cable_options", {}).get(str(cable), {})
            for here, there in ((cable.a, cable.b), (cable.b, cable.a)):
                peer = profiles[there.host]
                generations = (ports[(here.host, here.number)]["generation"], ports[(there.host, there.number)]["generation"])
                # TB5 (80 Gb/s) only when both ends are; replayed Macs may be models the catalogue lacks.
                # A TB4 (or worse) cable, or a dock, holds the link at its own speed.
                speed = min(80 if min(generations) >= 5 else 40, options.get("speed", 80))
                mac = {
                    "name": peer["model_name"], "model_id": peer["model_id"],
                    "domain_uuid": ports[(there.host, there.number)]["domain_uuid"],
                    "rdma_enabled": peer["rdma_enabled"],
                }
                ports[(here.host, here.number)]["link"] = (
                    {"kind": "dock", "speed_gbps": min(speed, 40), "name": options["dock"],
                     "vendor": options["dock"].split()[0], "behind": mac}
                    if options.get("dock") else {"kind": "mac", "speed_gbps": speed, "peer": mac})
        for name, prof in profiles.items():
            self._write_profile(name, prof)

    def _port_counts(self) -> dict[str, int]:
        return {name: _port_count(self.profile(name)) for name in self.state["nodes"]}

    def unplug(self, end: str) -> Cable:
        self._require_up()
        port = _port_arg(end)
        self._require(port.host)
        for cable in self.cables():
            if port in (cable.a, cable.b):
                self._disconnect(cable)
                self.state["cables"].remove(str(cable))
                self.state.get("cable_options", {}).pop(str(cable), None)
                self._save()
                self._refresh_links()
                return cable
        raise SimError(f"nothing is plugged into {port}")

    def plug(self, a: str, b: str, speed: int | None = None, dock: str | None = None) -> Cable:
        """Cable two ports; `speed` models a slower cable (40: a TB4 cable), `dock` a dock in between."""
        self._require_up()
        cable = parse_cables([f"{a} -- {b}"], self._port_counts())[0]
        try:
            parse_cables(self.state["cables"] + [str(cable)])
        except CablePlanError as exc:
            raise SimError(str(exc)) from exc
        self._connect(cable)
        self.state["cables"].append(str(cable))
        options = {k: v for k, v in (("speed", speed), ("dock", dock)) if v}
        if options:
            self.state.setdefault("cable_options", {})[str(cable)] = options
        self._save()
        self._refresh_links()
        return cable

    # ---- node lifecycle --------------------------------------------------------------
    def _spawn(self, name: str, command: list[str], **popen) -> subprocess.Popen:
        argv = ["ip", "netns", "exec", self.ns(name), "unshare", "--mount", "--uts", "--propagation", "private",
                "--", "/bin/sh", "-c", _NODE_INIT, "macsim-init", str(self.fs(name)), name, *command]
        env = {"PATH": NODE_PATH, "HOME": "/var/root", "LANG": "C.UTF-8"}
        return subprocess.Popen(argv, env=env, **popen)

    def _start(self, name: str) -> None:
        node = self._require(name)
        log = open(self.dir / "nodes" / name / "console.log", "ab")
        proc = self._spawn(name, ["/bin/sh", "-c", _BOOT_THEN_SSHD], stdin=subprocess.DEVNULL,
                           stdout=log, stderr=log, start_new_session=True)
        log.close()
        node.update(pid=proc.pid, status="running")
        self._save()

    def _wait_for_ssh(self, name: str, timeout: float = 20.0) -> None:
        node = self.state["nodes"][name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((node["management_ip"], 22), timeout=1):
                return
            if not _alive(node.get("pid")):
                break
            time.sleep(0.1)
        tail = (self.dir / "nodes" / name / "console.log").read_text(errors="replace")[-2000:]
        raise SimError(f"{name} did not come up (Remote Login not reachable); console:\n{tail}")

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

    def _forget_runtime_state(self, name: str) -> None:
        """What a reboot loses: addresses and routes set with ifconfig/route, sysctl -w values."""
        ns = self.ns(name)
        links = json.loads(run(["ip", "-n", ns, "-j", "link", "show"]).stdout)
        for link in links:
            if link["ifname"] != "lo":
                run(["ip", "-n", ns, "addr", "flush", "dev", link["ifname"]])
        run(["ip", "-n", ns, "route", "flush", "table", "main"], check=False)
        rundir = self.fs(name) / LIBEXEC / "run"
        for child in rundir.iterdir():
            child.unlink() if not child.is_dir() else _rmtree(child)
        profile = self.profile(name)
        profile["rdma_enabled"] = profile["nvram_rdma"]
        profile["in_recovery"] = False
        self._write_profile(name, profile)

    def reboot(self, name: str) -> None:
        self._require_up()
        self._require(name)
        self._stop(name)
        self._forget_runtime_state(name)
        self._refresh_links()
        self._start(name)
        self._wait_for_ssh(name)

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

    def exec(self, name: str, command: list[str]) -> int:
        """Run a command as root on the node's console (its namespaces), not over SSH."""
        self._require_up()
        node = self._require(name)
        if node["status"] != "running" or not _alive(node.get("pid")):
            raise SimError(f"{name} is not running (status: {node['status']}); try: mlx-fleet sim reboot {name}")
        argv = ["nsenter", "-t", str(node["pid"]), "-n", "-m", "-u", "--", "/usr/bin/env", f"PATH={NODE_PATH}", *command]
        return subprocess.run(argv).returncode

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

    def _require_up(self) -> None:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir} (run: mlx-fleet sim up --dir {self.dir})")

    # ---- status ------------------------------------------------------------------------
    def status(self) -> dict:
        self._require_up()
        nodes = []
        for name in self.node_names():
            node, profile = self.state["nodes"][name], self.profile(name)
            alive = node["status"] == "running" and _alive(node.get("pid"))
            nodes.append({
                "name": name, "model": node["model"], "status": node["status"] if alive or node["status"] != "running" else "crashed",
                "management_ip": node.get("management_ip"), "rdma": "enabled" if profile["rdma_enabled"] else "disabled",
                "macos": f"{profile['os_version']} ({profile['os_build']})", "serial": profile["serial"],
            })
        return {"dir": str(self.dir), "index": self.index, "nodes": nodes, "cables": self.state["cables"]}

    # ---- access files ------------------------------------------------------------------
    def _write_access_files(self) -> None:
        lines, known = [], []
        for name in self.node_names():
            ip = self.state["nodes"][name]["management_ip"]
            lines += [f"Host {name}", f"  HostName {ip}", f"  User {host.ADMIN_USER}",
                      f"  IdentityFile {self.dir / 'id_ed25519'}", "  IdentitiesOnly yes",
                      f"  UserKnownHostsFile {self.dir / 'known_hosts'}", "  StrictHostKeyChecking yes", ""]
            pub = (self.fs(name) / LIBEXEC / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"{name},{ip} {pub[0]} {pub[1]}")
        (self.dir / "ssh_config").write_text("# Written by mlx-fleet sim up\n" + "\n".join(lines))
        (self.dir / "known_hosts").write_text("\n".join(known) + "\n")
        inventory = {"all": {"children": {"mlx_cluster": {
            "hosts": {name: {"mlx_fleet_model": self.state["nodes"][name]["model"]} for name in self.node_names()},
            "vars": {
                "ansible_user": host.ADMIN_USER,
                "ansible_python_interpreter": "/usr/bin/python3",
                "ansible_ssh_common_args": f"-F {self.dir / 'ssh_config'}",
                # Clusters on one machine share node names: keep Ansible's persistent SSH
                # connections apart, or a run could reuse another cluster's connection.
                "ansible_control_path_dir": str(self.dir / "cp"),
                **environment_vars(),
            },
        }}}}
        (self.dir / "inventory.yml").write_text(
            "# Written by mlx-fleet sim up: the simulated cluster as an Ansible inventory.\n"
            + yaml.safe_dump(inventory, sort_keys=False)
        )
        # ssh reads the drop-ins in name order and the first match wins: naming them by
        # reverse creation time makes a plain `ssh NODE` reach the newest cluster with that name.
        self.state["ssh_drop_in"] = str(DROP_IN_DIR / f"mlx-fleet-sim-{10**10 - int(time.time()):010d}-{self.index}.conf")
        self._save()
        Path(self.state["ssh_drop_in"]).write_text(
            f"# mlx-fleet sim cluster in {self.dir}\nInclude {self.dir / 'ssh_config'}\n")

    # ---- down ---------------------------------------------------------------------------
    def down(self) -> None:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir}")
        for name in self.state["nodes"]:
            self._stop(name)
        # Names are prefix-scanned too, so a half-built cluster leaves nothing behind.
        for ns in run(["ip", "netns", "list"]).stdout.split("\n"):
            ns = ns.split(" ")[0]
            if ns.startswith(f"{self.prefix}-"):
                self._kill_netns_processes(ns)
                run(["ip", "netns", "del", ns], check=False)
        links = json.loads(run(["ip", "-j", "link", "show"]).stdout)
        for link in links:
            if link["ifname"] == self.bridge or link["ifname"].startswith(f"m{self.index}n"):
                run(["ip", "link", "del", link["ifname"]], check=False)
        for drop_in in DROP_IN_DIR.glob(f"mlx-fleet-sim-*-{self.index}.conf"):
            drop_in.unlink()
        for artefact in ("ssh_config", "known_hosts", "inventory.yml", "id_ed25519", "id_ed25519.pub", "admin_password"):
            (self.dir / artefact).unlink(missing_ok=True)
        _rmtree(self.dir / "nodes")
        with host.registry_lock():
            host.release_index(self.index)
            host.release_shared_resources()
        self.state_path.unlink(missing_ok=True)
        self.state = None

    def _kill_netns_processes(self, ns: str) -> None:
        for pid in run(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def environment_vars() -> dict:
    """The mlx_env_* variables of the sim's inventory: what its nodes can install."""
    python = run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
    return {"mlx_env_python_interpreter": "/usr/bin/python3", "mlx_env_python_version": python,
            "mlx_env_platforms": ["linux-aarch64", "linux-x86_64"], "mlx_env_lock_file": str(SIM_ENV_LOCK)}


def _sshd_config(listen_ip: str) -> str:
    return "\n".join([
        "# Remote Login for this simulated Mac",
        f"ListenAddress {listen_ip}",
        "HostKey /usr/local/libexec/macsim/ssh/ssh_host_ed25519_key",
        "PidFile none",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        f"AllowUsers {host.ADMIN_USER}",
        "AcceptEnv LANG LC_*",
        "PrintMotd no",
        "Subsystem sftp internal-sftp",
        "",
    ])


def _port_count(profile: dict) -> int:
    """The highest Thunderbolt receptacle number (the catalogue's port count for its models)."""
    return max((p["receptacle"] for p in profile["thunderbolt"]), default=0)


def _port_arg(text: str) -> Port:
    try:
        return parse_port(text)
    except CablePlanError as exc:
        raise SimError(str(exc)) from exc


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _rmtree(path: Path) -> None:
    run(["rm", "-rf", "--one-file-system", str(path)], check=False)
