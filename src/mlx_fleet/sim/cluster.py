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
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import Cable, CablePlanError, Port, parse_cable, parse_cables, parse_port
from mlx_fleet.sim import host
from mlx_fleet.sim.doubles import install_doubles
from mlx_fleet.sim.host import DROP_IN_DIR, SimError, run
from mlx_fleet.sim.layout import Layout
from mlx_fleet.sim import replay
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS, Model
from mlx_fleet.sim.models import DEFAULT_OS, make_profile

NODE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
CONSOLE_ENV = {"PATH": NODE_PATH, "HOME": "/var/root", "LANG": "C.UTF-8"}  # root at the node's console
LIBEXEC = "usr/local/libexec/macsim"
# A Mac's own folders (and the files etc/hosts, etc/group, etc/shadow): /tmp too, as every Mac has its own.
PRIVATE_DIRS = ("opt", "usr/local", "Library", "Users", "etc/sudoers.d", "tmp")
SETTABLE = {
    "os_version": str, "os_build": str, "memory_gb": int, "serial": str,
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
if [ -e "$fs/etc/shadow" ]; then mount --bind "$fs/etc/shadow" /etc/shadow; fi
install -d -m 1777 "$fs/tmp"  # sticky and world-writable, as /tmp is (made here for older clusters too)
mount --bind "$fs/tmp" /tmp  # last: the node's disk may itself be under the host's /tmp
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
# FileVault locked at the login window: the data volume (keys, launchd jobs) is unavailable. Since macOS 26 a
# password login over SSH unlocks it (apple_ssh_and_filevault(7): no session, SSH drops briefly, then everything
# starts): profile "filevault_locked" "ssh-unlock". Where that is off ("console"), no login works until a person
# logs in at the Mac.
_LOCKED_SSHD = ("/usr/local/libexec/macsim/boot && "
                "exec /usr/sbin/sshd -D -e -f /usr/local/libexec/macsim/ssh/sshd_config_locked{suffix}")
SSHD_LOCKED = {"console": ("", "AuthorizedKeysFile none\nPasswordAuthentication no\n"),
               "ssh-unlock": ("_ssh", "AuthorizedKeysFile none\nPasswordAuthentication yes\nForceCommand /bin/true\n")}
UNLOCKED_OVER_SSH = "Accepted password for "  # sshd -e's line in the console log
UPDATE_FAULTS = ("no-prepare", "no-return", "filevault-locked", "rdma-off")

# Remote Login as macOS has it: every address, the account password or a key.
SSHD_CONFIG = "\n".join([
    "# Remote Login for this simulated Mac",
    "ListenAddress 0.0.0.0",
    "HostKey /usr/local/libexec/macsim/ssh/ssh_host_ed25519_key",
    "PidFile none",
    "UsePAM no",
    "PasswordAuthentication yes",
    "KbdInteractiveAuthentication no",
    "PermitRootLogin no",
    f"AllowUsers {host.ADMIN_USER}",
    "AcceptEnv LANG LC_*",
    "PrintMotd no",
    "Subsystem sftp internal-sftp",
    "",
])


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

    @property
    def controller_bridge(self) -> str:
        """The host's end of the Thunderbolt cables of nodes managed over Thunderbolt (10.214.K.1/24)."""
        return f"{self.prefix}tb"

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
        host.write_file(self.state_path, json.dumps(self.state, indent=2))

    def profile(self, name: str) -> dict:
        return json.loads((self.fs(name) / LIBEXEC / "node.json").read_text())

    def _write_profile(self, name: str, profile: dict) -> None:
        host.write_file(self.fs(name) / LIBEXEC / "node.json", json.dumps(profile, indent=2))

    # ---- up ----------------------------------------------------------------------
    def up(self, layout: Layout, seed: int = 0) -> None:
        host.require_host_tools()
        if self.state:
            raise SimError(f"a simulated cluster is already up in {self.dir}; run 'mlx-fleet sim down --dir {self.dir}' first")
        for name in layout.models:
            _check_node_name(name)
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
        host.write_file(self.dir / "admin_password", password + "\n", 0o600)
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
        for name, how in layout.manage_over.items():
            self.state["nodes"][name]["manage_over"] = self._plan_management(name, how, profiles[name], cables)
        for name, profile in profiles.items():
            self._make_node(name, profile)
            if name in layout.replays:
                replay.install(layout.replays[name].recording, self.fs(name), LIBEXEC)
        self.state["cables"] = [str(c) for c in cables]
        for cable in cables:
            self._connect(cable)
        for name in layout.manage_over:
            self._cable_controller(name)
        self._refresh_links()
        for name in layout.models:
            self._start(name)
        self._save()
        for name in layout.models:
            self._wait_for_ssh(name)
        for name in layout.manage_over:
            self._configure_management(name)
        self._write_access_files()

    # ---- managed over Thunderbolt ---------------------------------------------------
    def _plan_management(self, name: str, how: str | int, profile: dict, cables: list[Cable]) -> dict:
        """The controller's cable to NAME: which port, and the address NAME answers on."""
        used = {end.number for cable in cables for end in (cable.a, cable.b) if end.host == name}
        devices = {p["receptacle"]: p["device"] for p in profile["thunderbolt"]}
        option = f"--manage-over {name}={'bridge0' if how == 'bridge0' else f'tb:{how}'}"
        if how == "bridge0":
            free = [n for n in sorted(devices) if n not in used]
            if not free:
                raise SimError(f"{option}: every Thunderbolt port of {name} is cabled; the controller's cable needs one")
            port = free[-1]
        elif how not in devices:
            raise SimError(f"{option}: {name} has no Thunderbolt port {how}")
        elif how in used:
            raise SimError(f"{option}: port {how} of {name} is cabled to another Mac; pick a free port")
        else:
            port = how
        if how == "bridge0":  # the cable's traffic really goes through bridge0 (see doubles/macsim/ifconfig.py)
            profile["bridge_data_path"] = [devices[port]]
        return {"interface": "bridge0" if how == "bridge0" else devices[port], "port": port,
                "ip": f"10.214.{self.index}.{11 + self._rank(name)}"}

    def _cable_controller(self, name: str) -> None:
        """Plug the controller's Thunderbolt cable into NAME: the port's far end joins the host's bridge."""
        if not json.loads(run(["ip", "-j", "link", "show", self.controller_bridge], check=False).stdout or "[]"):
            run(["ip", "link", "add", self.controller_bridge, "type", "bridge"])
            run(["ip", "addr", "add", f"10.214.{self.index}.1/24", "dev", self.controller_bridge])
            run(["ip", "link", "set", self.controller_bridge, "up"])
        end = self._management_end(name)
        run(["ip", "-n", self.patch_ns, "link", "set", end, "netns", str(os.getpid())])
        run(["ip", "link", "set", end, "master", self.controller_bridge, "up"])

    def _configure_management(self, name: str) -> None:
        """What the person who cabled the controller did on the Mac: a manual address on the
        Thunderbolt Bridge, or on a network service of its own for the Thunderbolt port."""
        node = self.state["nodes"][name]
        plan = node["manage_over"]
        if plan["interface"] == "bridge0":
            service = "Thunderbolt Bridge"
        else:
            service = next(i["hardware_port"] for i in self.profile(name)["interfaces"] if i["device"] == plan["interface"])
            self._node_run(name, ["networksetup", "-createnetworkservice", service, service])
        self._node_run(name, ["networksetup", "-setmanual", service, plan["ip"], "255.255.255.0"])
        node["management_ip"] = plan["ip"]
        self._save()

    def _management_end(self, name: str) -> str:
        """The host-side end of the link the controller manages NAME through."""
        plan = self.state["nodes"][name].get("manage_over")
        return self._patch_end(Port(name, plan["port"])) if plan else f"m{self.index}n{self._rank(name)}e"

    def _controller_peer(self) -> dict:
        """The controller as a Mac at the far end of a Thunderbolt cable (a MacBook Pro)."""
        laptop = MODELS["macbook-pro-m4-max"]
        domain = uuid.uuid5(uuid.NAMESPACE_URL, f"macsim:{self.state['seed']}:controller")
        return {"name": laptop.model_name, "model_id": laptop.model_id, "domain_uuid": str(domain).upper(),
                "rdma_enabled": False}

    def set_link(self, name: str, up: bool) -> str:
        """Take the controller's link to NAME down (a pulled cable, a dead switch port) or up;
        returns what that link is."""
        self._require_up()
        node = self._require(name)
        run(["ip", "link", "set", self._management_end(name), "up" if up else "down"])
        node["link"] = "up" if up else "down"
        self._save()
        self._refresh_links()
        plan = node.get("manage_over")
        if plan:
            return f"{plan['interface']}, the controller's cable in Thunderbolt {plan['port']}"
        return self.profile(name)["management"]["device"]

    def _write_client_key(self) -> None:
        key = self.dir / "id_ed25519"
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mlx-fleet-sim@{self.dir}", "-f", str(key)])

    def _make_node(self, name: str, profile: dict, factory_password: str | None = None) -> None:
        """Build the node's disk and network. With `factory_password` it is a Mac just out of
        Setup Assistant: that admin password, no key of ours, its default computer name."""
        ns, fs, rank = self.ns(name), self.fs(name), self._rank(name)
        uid, gid = host.admin_ids()
        for d in PRIVATE_DIRS + ("usr/local/bin", f"{LIBEXEC}/run", f"{LIBEXEC}/ssh", "Library/LaunchDaemons",
                                 "Library/Preferences/SystemConfiguration"):
            (fs / d).mkdir(parents=True, exist_ok=True)
        for d in fs.rglob("*"):
            if d.is_dir():
                d.chmod(0o755)
        fs.chmod(0o755)
        home = fs / "Users" / host.ADMIN_USER
        home.mkdir(parents=True, exist_ok=True)
        owned = [(home, 0o750)]
        other = fs / "Users" / host.OTHER_USER
        other.mkdir(exist_ok=True)
        os.chown(other, *host.admin_ids(host.OTHER_USER))
        other.chmod(0o750)
        if factory_password is None:
            (home / ".ssh").mkdir(parents=True, exist_ok=True)
            (home / ".ssh" / "authorized_keys").write_text((self.dir / "id_ed25519.pub").read_text())
            owned += [(home / ".ssh", 0o700), (home / ".ssh" / "authorized_keys", 0o600)]
            local_names = [name]
        else:
            self._write_factory_account(name, factory_password)
            local_names = [name, self._write_factory_names(name, profile["model_name"])]
        for path, mode in owned:
            os.chown(path, uid, gid)
            path.chmod(mode)
        # The Mac's own names resolve (mDNS does it on macOS), so sudo does not complain.
        (fs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                                      + "".join(f"127.0.0.1\t{n} {n}.local\n" for n in local_names))
        self._write_sudoers(name, profile["sudo"])
        install_doubles(fs)
        self._write_profile(name, profile)
        ssh_dir = fs / LIBEXEC / "ssh"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(ssh_dir / "ssh_host_ed25519_key")])
        (ssh_dir / "sshd_config").write_text(SSHD_CONFIG)
        for suffix, extra in SSHD_LOCKED.values():
            (ssh_dir / f"sshd_config_locked{suffix}").write_text(SSHD_CONFIG + extra)

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

    def _write_factory_account(self, name: str, password: str) -> None:
        """The admin account's own password on this Mac: a node-private /etc/shadow, and a copy
        for the tests in DIR/nodes/NAME/admin-password (0600)."""
        if not shutil.which("openssl"):
            raise SimError("missing on this machine: openssl; install with: apt-get install -y openssl")
        hashed = run(["openssl", "passwd", "-6", "-stdin"], input=password + "\n").stdout.strip()
        today = int(time.time() // 86400)
        lines = [f"{entry.pw_name}:{hashed if entry.pw_name == host.ADMIN_USER else '*'}:{today}:0:99999:7:::"
                 for entry in pwd.getpwall()]
        host.write_file(self.fs(name) / "etc/shadow", "\n".join(lines) + "\n", 0o600)
        host.write_file(self.dir / "nodes" / name / "admin-password", password + "\n", 0o600)

    def _write_factory_names(self, name: str, model_name: str) -> str:
        """Setup Assistant's ComputerName and LocalHostName; returns the LocalHostName."""
        computer_name, local_host_name = _factory_names(model_name)
        prefs = self.fs(name) / "Library/Preferences/SystemConfiguration/preferences.json"
        prefs.write_text(json.dumps({"System": {"ComputerName": computer_name, "LocalHostName": local_host_name}}, indent=2))
        prefs.chmod(0o644)
        return local_host_name

    def add(self, name: str, model: Model, os_version: str | None = None, os_build: str | None = None) -> dict:
        """Power on a new Mac in its factory state (see docs/macsim.md, "A new Mac"); not cabled,
        not in the inventory, its host key not in DIR/known_hosts."""
        self._require_up()
        _check_node_name(name)
        if name in self.state["nodes"]:
            raise SimError(f"{name} is already a node of the cluster in {self.dir}")
        rank = 1 + max(node["rank"] for node in self.state["nodes"].values())
        if 11 + rank > 254:
            raise SimError(f"the cluster in {self.dir} has no management address left for {name}")
        net = f"10.213.{self.index}"
        profile = make_profile(name, model, seed=self.state["seed"], management_ip=f"{net}.{11 + rank}",
                               management_prefix=24, router=f"{net}.1", rdma_enabled=False,
                               os_version=(os_version or DEFAULT_OS[0], os_build or DEFAULT_OS[1]))
        profile["sudo"] = "password"
        self.state["nodes"][name] = {"rank": rank, "model": model.key, "status": "off",
                                     "management_ip": profile["management"]["ip"]}
        self._save()
        try:
            self._make_node(name, profile, factory_password=secrets.token_urlsafe(12))
            self._refresh_links()
            self._start(name)
            self._wait_for_ssh(name)
        except BaseException:
            self._discard(name)
            raise
        with open(self.dir / "ssh_config", "a") as ssh_config:
            ssh_config.write("\n" + "\n".join(self._ssh_host_block(name)))
        pub = self.fs(name) / LIBEXEC / "ssh" / "ssh_host_ed25519_key.pub"
        fingerprint = run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)]).stdout.split()[1]
        return {"name": name, "address": profile["management"]["ip"], "fingerprint": fingerprint,
                "computer_name": _factory_names(profile["model_name"])[0],
                "password_file": str(self.dir / "nodes" / name / "admin-password")}

    def _discard(self, name: str) -> None:
        """Undo a half-made node (a failed add). Its veths' far ends go with its namespace."""
        self._stop(name)
        run(["ip", "netns", "del", self.ns(name)], check=False)
        _rmtree(self.dir / "nodes" / name)
        del self.state["nodes"][name]
        self._save()

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
        for name, node in self.state["nodes"].items():
            plan = node.get("manage_over")
            if plan and node.get("link") != "down":
                port = ports[(name, plan["port"])]
                port["link"] = {"kind": "mac", "speed_gbps": 80 if port["generation"] >= 5 else 40,
                                "peer": self._controller_peer()}
        for name, prof in profiles.items():
            self._write_profile(name, prof)

    def _port_counts(self) -> dict[str, int]:
        return {name: _port_count(self.profile(name)) for name in self.state["nodes"]}

    def unplug(self, end: str) -> Cable:
        self._require_up()
        port = _port_arg(end)
        self._require(port.host)
        self._refuse_controller_port(port)
        for cable in self.cables():
            if port in (cable.a, cable.b):
                self._disconnect(cable)
                self.state["cables"].remove(str(cable))
                self.state.get("cable_options", {}).pop(str(cable), None)
                self._save()
                self._refresh_links()
                return cable
        raise SimError(f"nothing is plugged into {port}")

    def _refuse_controller_port(self, port: Port) -> None:
        plan = self.state["nodes"].get(port.host, {}).get("manage_over")
        if plan and plan["port"] == port.number:
            raise SimError(f"{port} holds the controller's cable (--manage-over); use: mlx-fleet sim link {port.host} down|up")

    def plug(self, a: str, b: str, speed: int | None = None, dock: str | None = None) -> Cable:
        """Cable two ports; `speed` models a slower cable (40: a TB4 cable), `dock` a dock in between."""
        self._require_up()
        cable = parse_cables([f"{a} -- {b}"], self._port_counts())[0]
        for end in (cable.a, cable.b):
            self._refuse_controller_port(end)
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
        return subprocess.Popen(argv, env=CONSOLE_ENV, **popen)

    def _start(self, name: str) -> None:
        node = self._require(name)
        log = open(self.dir / "nodes" / name / "console.log", "ab")
        profile = self.profile(name)
        locked = profile.get("filevault_locked")
        if locked:  # where the agent looks for the unlocking login
            console = self.dir / "nodes" / name / "console.log"
            profile["locked_log_offset"] = console.stat().st_size if console.exists() else 0
            self._write_profile(name, profile)
        command = _LOCKED_SSHD.format(suffix=SSHD_LOCKED[locked][0]) if locked else _BOOT_THEN_SSHD
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
            if not _alive(node.get("pid")):
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

    def _forget_runtime_state(self, name: str) -> None:
        """What a reboot loses: addresses and routes set with ifconfig/route, sysctl -w values, /tmp."""
        ns = self.ns(name)
        links = json.loads(run(["ip", "-n", ns, "-j", "link", "show"]).stdout)
        for link in links:
            if link["ifname"] != "lo":
                run(["ip", "-n", ns, "addr", "flush", "dev", link["ifname"]])
        run(["ip", "-n", ns, "route", "flush", "table", "main"], check=False)
        for folder in (self.fs(name) / LIBEXEC / "run", self.fs(name) / "tmp"):
            for child in folder.iterdir() if folder.is_dir() else ():
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
        profile = self.profile(name)
        if profile.pop("rdma_wedged", None) is not None:  # a restart is what unwedges RDMA
            self._write_profile(name, profile)
        self._refresh_links()
        self._start(name)
        self._wait_for_ssh(name)

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
        if _alive(self.state.get("power_agent")):
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
        if node["status"] != "running" or not _alive(node.get("pid")):
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
                "link": (node.get("manage_over", {}).get("interface") or profile["management"]["device"])
                + (" down" if node.get("link") == "down" else ""),
                "macos": f"{profile['os_version']} ({profile['os_build']})", "serial": profile["serial"],
            })
        return {"dir": str(self.dir), "index": self.index, "nodes": nodes, "cables": self.state["cables"]}

    # ---- access files ------------------------------------------------------------------
    def _write_access_files(self) -> None:
        lines, known = [], []
        for name in self.node_names():
            lines += self._ssh_host_block(name)
            pub = (self.fs(name) / LIBEXEC / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"{','.join([name, *self._addresses(name)])} {pub[0]} {pub[1]}")
        host.write_file(self.dir / "ssh_config", "# Written by mlx-fleet sim up\n" + "\n".join(lines))
        host.write_file(self.dir / "known_hosts", "\n".join(known) + "\n")
        inventory = {"all": {"children": {"mlx_cluster": {
            "hosts": {name: inventory_host_vars(self.state["nodes"][name]["model"]) for name in self.node_names()},
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
        host.write_file(self.dir / "inventory.yml",
                        "# Written by mlx-fleet sim up: the simulated cluster as an Ansible inventory.\n"
                        + yaml.safe_dump(inventory, sort_keys=False))
        # ssh reads the drop-ins in name order and the first match wins: naming them by
        # reverse creation time makes a plain `ssh NODE` reach the newest cluster with that name.
        self.state["ssh_drop_in"] = str(DROP_IN_DIR / f"mlx-fleet-sim-{10**10 - int(time.time()):010d}-{self.index}.conf")
        self._save()
        Path(self.state["ssh_drop_in"]).write_text(
            f"# mlx-fleet sim cluster in {self.dir}\nInclude {self.dir / 'ssh_config'}\n")

    def _addresses(self, name: str) -> list[str]:
        """The addresses the controller reaches NAME at: its management address, then, for a node
        managed over Thunderbolt, its Ethernet (or Wi-Fi) address, where it still answers."""
        return list(dict.fromkeys([self.state["nodes"][name]["management_ip"], self.profile(name)["management"]["ip"]]))

    def _ssh_host_block(self, name: str) -> list[str]:
        """NAME by its management address; its other addresses too, so an inventory can point its
        ansible_host there (as a user re-points a Mac from Thunderbolt to Ethernet)."""
        login = [f"  User {host.ADMIN_USER}", f"  IdentityFile {self.dir / 'id_ed25519'}", "  IdentitiesOnly yes",
                 f"  UserKnownHostsFile {self.dir / 'known_hosts'}", "  StrictHostKeyChecking yes", ""]
        management, *others = self._addresses(name)
        return [f"Host {name}", f"  HostName {management}", *login] + [line for address in others
                                                                      for line in (f"Host {address}", *login)]

    # ---- down ---------------------------------------------------------------------------
    def down(self) -> None:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir}")
        if _alive(self.state.get("power_agent")):
            os.kill(self.state["power_agent"], signal.SIGTERM)
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
            if link["ifname"] in (self.bridge, self.controller_bridge) or link["ifname"].startswith(f"m{self.index}n"):
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


def _as_user(uid, gid, command: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", *command]


def _factory_names(model_name: str) -> tuple[str, str]:
    """What Setup Assistant names a Mac: "admin's Mac mini", and "admins-Mac-mini" for Bonjour."""
    computer_name = f"{host.ADMIN_USER}'s {model_name}"
    return computer_name, computer_name.replace("'", "").replace(" ", "-")


def _check_node_name(name: str) -> None:
    if len(name) > 40 or not name.replace("-", "").isalnum():
        raise SimError(f"node name {name!r}: use letters, digits and '-' only")


def inventory_host_vars(model_key: str) -> dict:
    """A node's variables in the sim's inventory: its model key, when the catalogue has it (a replayed Mac the
    catalogue cannot place gets none, and the product reads its facts, as for any undeclared Mac)."""
    return {"mlx_fleet_model": model_key} if model_key in MODELS else {}


def environment_vars() -> dict:
    """The mlx_env_* variables of the sim's inventory: what its nodes can install."""
    python = run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
    return {"mlx_env_python_interpreter": "/usr/bin/python3", "mlx_env_python_version": python,
            "mlx_env_platforms": ["linux-aarch64", "linux-x86_64"], "mlx_env_lock_file": str(SIM_ENV_LOCK)}



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


def _rmtree(path: Path) -> None:
    run(["rm", "-rf", "--one-file-system", str(path)], check=False)
