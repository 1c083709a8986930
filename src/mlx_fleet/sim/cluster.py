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

`Cluster` is the whole: it builds and removes a cluster (here) from parts with one job each: its
state (state.py), network plumbing (plumbing.py), accounts and sshd (accounts.py), cables
(cabling.py), power (lifecycle.py), macOS updates (updates.py), the console (console.py), the
files the controller reaches it with (access.py) and snapshots (snapshot.py).
"""

from __future__ import annotations

import os
import secrets
import signal

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import Model
from mlx_fleet.sim import host, replay
from mlx_fleet.sim.access import Access
from mlx_fleet.sim.accounts import Accounts, factory_names
from mlx_fleet.sim.cabling import Cabling, port_count
from mlx_fleet.sim.console import Console
from mlx_fleet.sim.doubles import install_doubles
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.layout import Layout
from mlx_fleet.sim.lifecycle import Lifecycle, process_alive
from mlx_fleet.sim.models import DEFAULT_OS, make_profile
from mlx_fleet.sim.snapshot import SNAPSHOTS, Snapshots
from mlx_fleet.sim.state import LIBEXEC, PRIVATE_DIRS, rmtree
from mlx_fleet.sim.updates import Updates


class Cluster(Snapshots, Access, Console, Updates, Lifecycle, Cabling, Accounts):
    def up(self, layout: Layout, seed: int = 0) -> None:
        host.require_host_tools()
        if self.state:
            raise SimError(f"a simulated cluster is already up in {self.dir}; run 'mlx-fleet sim down --dir {self.dir}' first")
        for name in layout.models:
            _check_node_name(name)
        host.make_cluster_dir(self.dir)
        self._check_own_files()
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
                                     {name: port_count(p) for name, p in profiles.items()})
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

    def _plan_management(self, name: str, how: str | int, profile: dict, cables: list[Cable]) -> dict:
        """The controller's cable to NAME: which port, and the address NAME answers on."""
        used = {end.receptacle for cable in cables for end in (cable.a, cable.b) if end.host == name}
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

    def _make_node(self, name: str, profile: dict, factory_password: str | None = None) -> None:
        """Build the node's disk and network. With `factory_password` it is a Mac just out of
        Setup Assistant: that admin password, no key of ours, its default computer name."""
        fs = self.fs(name)
        for d in PRIVATE_DIRS + ("usr/local/bin", f"{LIBEXEC}/run", f"{LIBEXEC}/ssh", "Library/LaunchDaemons",
                                 "Library/Preferences/SystemConfiguration"):
            (fs / d).mkdir(parents=True, exist_ok=True)
        for d in fs.rglob("*"):
            if d.is_dir():
                d.chmod(0o755)
        fs.chmod(0o755)
        local_names = self._make_accounts(name, profile, factory_password)
        # The Mac's own names resolve (mDNS does it on macOS), so sudo does not complain.
        (fs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                                      + "".join(f"127.0.0.1\t{n} {n}.local\n" for n in local_names))
        self._write_sudoers(name, profile["sudo"])
        install_doubles(fs)
        self._write_profile(name, profile)
        self._make_sshd(name)
        self._make_links(name, profile)

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
                "computer_name": factory_names(profile["model_name"])[0],
                "password_file": str(self.dir / "nodes" / name / "admin-password")}

    def _discard(self, name: str) -> None:
        """Undo a half-made node (a failed add). Its veths' far ends go with its namespace."""
        self._stop(name)
        run(["ip", "netns", "del", self.ns(name)], check=False)
        rmtree(self.dir / "nodes" / name)
        del self.state["nodes"][name]
        self._save()

    def status(self) -> dict:
        self._require_up()
        nodes = []
        for name in self.node_names():
            node, profile = self.state["nodes"][name], self.profile(name)
            alive = node["status"] == "running" and process_alive(node.get("pid"))
            nodes.append({
                "name": name, "model": node["model"], "status": node["status"] if alive or node["status"] != "running" else "crashed",
                "management_ip": node.get("management_ip"), "rdma": "enabled" if profile["rdma_enabled"] else "disabled",
                "link": (node.get("manage_over", {}).get("interface") or profile["management"]["device"])
                + (" down" if node.get("link") == "down" else ""),
                "macos": f"{profile['os_version']} ({profile['os_build']})", "serial": profile["serial"],
            })
        return {"dir": str(self.dir), "index": self.index, "nodes": nodes, "cables": self.state["cables"]}

    def down(self) -> None:
        if not self.state:
            raise SimError(f"no simulated cluster in {self.dir}")
        if process_alive(self.state.get("power_agent")):
            os.kill(self.state["power_agent"], signal.SIGTERM)
        for name in self.state["nodes"]:
            self._stop(name)
        self._remove_network()
        self._remove_access_files()
        rmtree(self.dir / "nodes")
        rmtree(self.dir / SNAPSHOTS)
        with host.registry_lock():
            host.release_index(self.index)
            host.release_shared_resources()
        self.state_path.unlink(missing_ok=True)
        self.state = None


def _check_node_name(name: str) -> None:
    if len(name) > 40 or not name.replace("-", "").isalnum():
        raise SimError(f"node name {name!r}: use letters, digits and '-' only")
