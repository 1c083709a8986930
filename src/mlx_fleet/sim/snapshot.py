"""Snapshots of a simulated cluster: its Macs' disks and network state (addresses, routes, links up or down),
its cables and the controller's files saved under DIR/snapshots/NAME, and put back, every Mac resumed as
saved rather than booted (see docs/macsim.md, "Snapshots").

A restore copies back only what changed since the snapshot: the snapshot keeps, for every file it
copied, the inode and change time (ctime) the file had on the live disk; a live file with both
unchanged is the saved one (nothing can set a ctime back), anything else is replaced or removed.
After a restore the manifest describes the restored disk, so the next restore is as quick."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from mlx_fleet.sim import host
from mlx_fleet.sim.access import CONTROL_PATH_DIR
from mlx_fleet.sim.cabling import Cabling
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.lifecycle import Lifecycle
from mlx_fleet.sim.state import rmtree

SNAPSHOTS = "snapshots"
# Not the cluster's saved state: the nodes (saved apart), the snapshots themselves, the sim's own record
# (saved as its cables and links), Ansible's SSH connection sockets, and logs, which only grow.
NOT_CONTROLLER_FILES = ("nodes", SNAPSHOTS, "state.json", CONTROL_PATH_DIR)
# What a node's record keeps across a restore: its cable to the controller and that link's state.
SAVED_NODE_KEYS = ("manage_over", "link", "management_ip")
_ROUTE_WORDS = {"gateway": "via", "dev": "dev", "protocol": "proto", "scope": "scope", "prefsrc": "src",
                "metric": "metric"}


class Snapshots(Lifecycle, Cabling):
    """`sim snapshot` and `sim restore`."""

    def _snapshot_dir(self, name: str) -> Path:
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise SimError(f"snapshot name {name!r}: use letters, digits, '-' and '_' only")
        return self.dir / SNAPSHOTS / name

    def snapshot(self, name: str) -> Path:
        """Save every Mac's disk, the cables and the controller's files as snapshot NAME (replacing one of
        that name). The Macs keep running: save them when no run is changing them."""
        self._require_up()
        folder = self._snapshot_dir(name)
        partial = folder.with_name(f".{name}.partial")
        rmtree(partial)
        partial.mkdir(parents=True, mode=0o700)
        for node in self.node_names():
            (partial / "nodes" / node).mkdir(parents=True)
            manifest = _live_manifest(self.fs(node))  # before the copy: a file changed meanwhile is copied back
            run(["cp", "-a", str(self.fs(node)), str(partial / "nodes" / node / "fs")])
            _save_manifest(partial / "nodes" / node, manifest)
            host.write_file(partial / "nodes" / node / "network.json", json.dumps(self._network(node)))
        controller = partial / "controller"
        controller.mkdir()
        for entry in _controller_files(self.dir):
            run(["cp", "-a", str(entry), str(controller / entry.name)])
        saved = {"nodes": {node: {k: v for k, v in record.items() if k in SAVED_NODE_KEYS}
                           for node, record in self.state["nodes"].items()},
                 "cables": self.state["cables"], "cable_options": self.state.get("cable_options", {})}
        host.write_file(partial / "state.json", json.dumps(saved, indent=2))
        rmtree(folder)
        partial.rename(folder)
        return folder

    def _network(self, node: str) -> dict:
        """The node's links (up or down) with their addresses, and its routes but the kernel's own."""
        ns = self.ns(node)
        links = [{"ifname": link["ifname"], "up": "UP" in link["flags"], "addresses": [
            {k: a[k] for k in ("family", "local", "prefixlen", "broadcast") if k in a} for a in link.get("addr_info", [])]}
            for link in json.loads(run(["ip", "-n", ns, "-j", "addr", "show"]).stdout) if link["ifname"] != "lo"]
        routes = [r for r in json.loads(run(["ip", "-n", ns, "-j", "route", "show", "table", "main"]).stdout)
                  if r.get("protocol") != "kernel"]
        return {"links": links, "routes": routes}

    def _set_network(self, node: str, saved: dict) -> None:
        """The node's links, addresses and routes as saved (after _flush_network)."""
        ip = ["ip", "-n", self.ns(node)]
        for link in saved["links"]:
            run([*ip, "link", "set", link["ifname"], "up" if link["up"] else "down"])
            for address in link["addresses"]:
                broadcast = ["broadcast", address["broadcast"]] if address.get("broadcast") else []
                nodad = ["nodad"] if address["family"] == "inet6" else []  # it was checked when first added
                run([*ip, "addr", "replace", f"{address['local']}/{address['prefixlen']}", *broadcast,
                     "dev", link["ifname"], *nodad])
        for route in saved["routes"]:
            argv = [route["dst"]] + [word for key in ("gateway", "dev", "protocol", "scope", "prefsrc", "metric")
                                     if key in route for word in (_ROUTE_WORDS[key], str(route[key]))]
            run([*ip, "route", "replace", *argv])

    def restore(self, name: str) -> list[str]:
        """Put snapshot NAME back: every Mac powered off, its disk and network state made the saved ones, the
        cables and the controller's link as saved, the controller's files as saved, every Mac resumed.
        Returns the Macs."""
        self._require_up()
        folder = self._snapshot_dir(name)
        if not (folder / "state.json").exists():
            known = sorted(p.name for p in (self.dir / SNAPSHOTS).glob("[!.]*")) if (self.dir / SNAPSHOTS).is_dir() else []
            raise SimError(f"no snapshot {name!r} in {self.dir} (snapshots: {', '.join(known) or 'none'})")
        saved = json.loads((folder / "state.json").read_text())
        if set(saved["nodes"]) != set(self.state["nodes"]):
            raise SimError(f"snapshot {name!r} has the Macs {', '.join(sorted(saved['nodes']))}, the cluster "
                           f"{', '.join(self.node_names())}: a Mac was added since (sim down, then up again)")
        for node in self.node_names():
            self._stop(node)
        for node in self.node_names():
            _sync(folder / "nodes" / node / "fs", self.fs(node), _load_manifest(folder / "nodes" / node))
            _save_manifest(folder / "nodes" / node, _live_manifest(self.fs(node)))
            self._flush_network(node)
        self._restore_cables(saved)
        for node in self.node_names():
            self._set_network(node, json.loads((folder / "nodes" / node / "network.json").read_text()))
        for node, record in saved["nodes"].items():
            live = self.state["nodes"][node]
            if (live.get("link") == "down") != (record.get("link") == "down"):
                run(["ip", "link", "set", self._management_end(node), "down" if record.get("link") == "down" else "up"])
            for key in SAVED_NODE_KEYS:
                live.pop(key, None)
            live.update(record)
        for entry in _controller_files(self.dir):
            rmtree(entry)
        for entry in (folder / "controller").iterdir():
            run(["cp", "-a", str(entry), str(self.dir / entry.name)])
        self._save()
        self._refresh_links()
        for node in self.node_names():
            self._start(node, resume=True)
        for node in self.node_names():
            self._wait_for_ssh(node)
        return self.node_names()

    def _restore_cables(self, saved: dict) -> None:
        for cable in self.cables():
            if str(cable) not in saved["cables"]:
                self._disconnect(cable)
        now = set(self.state["cables"])
        self.state["cables"] = list(saved["cables"])
        for cable in self.cables():
            if str(cable) not in now:
                self._connect(cable)
        self.state["cable_options"] = saved["cable_options"]
        for cable in self.cables():  # each cable's rate as saved: a limit set since is lifted
            self._limit(cable, saved["cable_options"].get(str(cable), {}).get("rate_mbit"))


def _controller_files(sim_dir: Path) -> list[Path]:
    return sorted(p for p in sim_dir.iterdir() if p.name not in NOT_CONTROLLER_FILES and not p.name.endswith(".log"))


def _live_manifest(root: Path) -> dict[str, list[int]]:
    """Every file and symlink under root (relative path) with its inode and ctime."""
    manifest = {}
    for folder, dirs, files in os.walk(root):
        for entry in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, entry)
            st = os.lstat(path)
            manifest[os.path.relpath(path, root)] = [st.st_ino, st.st_ctime_ns]
    return manifest


def _save_manifest(folder: Path, manifest: dict) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _load_manifest(folder: Path) -> dict[str, list[int]]:
    return json.loads((folder / "manifest.json").read_text())


def _sync(saved: Path, live: Path, manifest: dict[str, list[int]]) -> None:
    """Make the tree live the same as saved: what is not in saved goes, what changed since the manifest was
    taken (or is not a file of it) is copied from saved, with its owner, mode and times."""
    for folder, dirs, files in os.walk(live):
        rel_folder = os.path.relpath(folder, live)
        for entry in list(dirs) + files:
            rel = os.path.normpath(os.path.join(rel_folder, entry))
            path, source = os.path.join(folder, entry), os.path.join(saved, rel)
            live_st = os.lstat(path)
            try:
                saved_st = os.lstat(source)
            except FileNotFoundError:
                saved_st = None
            same_kind = saved_st is not None and stat.S_IFMT(live_st.st_mode) == stat.S_IFMT(saved_st.st_mode)
            if stat.S_ISDIR(live_st.st_mode) and same_kind:
                _copy_metadata(source, path, saved_st)
                continue
            if same_kind and manifest.get(rel) == [live_st.st_ino, live_st.st_ctime_ns]:
                continue
            if stat.S_ISDIR(live_st.st_mode):
                dirs.remove(entry)
                shutil.rmtree(path)
            else:
                os.unlink(path)
    for folder, dirs, files in os.walk(saved):
        rel_folder = os.path.relpath(folder, saved)
        for entry in list(dirs) + files:
            rel = os.path.normpath(os.path.join(rel_folder, entry))
            target = os.path.join(live, rel)
            if os.path.lexists(target):
                continue
            if entry in dirs:
                dirs.remove(entry)  # copied whole
            run(["cp", "-a", os.path.join(folder, entry), target])
    for folder, _, _ in os.walk(saved, topdown=False):  # last: adding and removing entries changed them
        saved_st = os.lstat(folder)
        os.utime(os.path.join(live, os.path.relpath(folder, saved)), ns=(saved_st.st_atime_ns, saved_st.st_mtime_ns))


def _copy_metadata(source: str, path: str, saved_st: os.stat_result) -> None:
    """A folder kept: its owner and mode as saved (its times follow its entries anyway)."""
    live_st = os.lstat(path)
    if (live_st.st_uid, live_st.st_gid) != (saved_st.st_uid, saved_st.st_gid):
        os.chown(path, saved_st.st_uid, saved_st.st_gid, follow_symlinks=False)
    if stat.S_IMODE(live_st.st_mode) != stat.S_IMODE(saved_st.st_mode):
        os.chmod(path, stat.S_IMODE(saved_st.st_mode))
