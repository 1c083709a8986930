"""`mlx-fleet models sync`: which Mac pulls which file from where (issue 28, docs/models-on-macs.md "Sync").

Only the files a Mac lacks or holds with other bytes move (its model_files_facts read, every byte hashed). Per
file, the Macs that hold it verified are its sources; a file no Mac holds has one source, the controller, feeding
one Mac (the first in the inventory that lacks it), so one copy at most crosses the management network. From the
sources, a breadth-first walk along the cables gives each Mac that lacks the file a neighbour to pull it from, over
that cable's /30: the copies go in parallel along the cables, and a Mac that has verified a file serves it on.
A Mac no cable reaches from a source pulls from the controller. Free space is checked on every Mac first.

With a fetcher (`mlx_fleet_models_source`), a Hub entry's file no Mac holds is fetched from the Hub by that Mac, the
first source of the walk; the controller sends none of it, so a Mac no cable reaches from a source is cut off.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.model_hub import HUB_SENDER
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import HUB
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Link
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status

CONTROLLER = "controller"  # the source of a file no Mac holds


@dataclass
class SyncPlan:
    """Per Mac what it pulls (by sender) and whom it serves; the Macs refused for space. No token: the plan is in
    the run's log, the token the Macs show each other is not (playbooks/models.yml)."""

    port: int
    pulls: dict[str, dict[str, list[dict]]] = field(default_factory=dict)  # mac -> sender -> files
    serves: dict[str, set[str]] = field(default_factory=dict)  # mac -> the neighbours that pull from it
    short_of_space: list[dict] = field(default_factory=list)  # {mac, needed, free}
    finish: dict[str, list[str]] = field(default_factory=dict)  # mac -> Hub entries whose blobs are all there, not present
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    fetched: dict[str, str] = field(default_factory=dict)  # Hub entry -> where it is fetched: a Mac, or CONTROLLER
    cut_off: dict[str, set[str]] = field(default_factory=dict)  # model -> the Macs no cable reaches from its sources

    def from_controller(self) -> list[dict]:
        """The files the controller sends (each {model, path}), to whichever Mac."""
        return [f for senders in self.pulls.values() for f in senders.get(CONTROLLER, [])]

    def to_json(self, addresses: dict[tuple[str, str], str]) -> dict:
        """Per Mac its model_copy arguments (receive: per sender its address, port and files; serve), and what it
        receives in all (files, bytes). ADDRESSES: (mac, neighbour) -> the mac's address on their cable."""
        macs = {}
        for mac in sorted(set(self.pulls) | set(self.serves) | set(self.finish)):
            receive = [{"sender": sender, "address": addresses.get((sender, mac)), "port": None if sender in (
                        CONTROLLER, HUB_SENDER) else self.port, "files": files}
                       for sender, files in sorted(self.pulls.get(mac, {}).items())]
            clients = sorted(self.serves.get(mac, ()))
            wanted = [f for sender in receive for f in sender["files"]]
            macs[mac] = {"receive": receive, "finish": self.finish.get(mac, []),
                         "serve": {"addresses": sorted({addresses[(mac, c)] for c in clients}), "port": self.port,
                                   "clients": len(clients)} if clients else None,
                         "files": len(wanted), "bytes": sum(self.sizes[(f["model"], f["path"])] for f in wanted)}
        return {"macs": macs, "short_of_space": self.short_of_space, "fetched": self.fetched}


def cable_addresses(links: list[Link]) -> dict[tuple[str, str], str]:
    """(mac, neighbour) -> the mac's address on a cable between them (the first such cable)."""
    found = {}
    for link in links:
        if link.a.address and link.b.address and link.a.host != link.b.host:
            found.setdefault((link.a.host, link.b.host), link.a.address)
            found.setdefault((link.b.host, link.a.host), link.b.address)
    return found


def needs(manifests: list[dict], facts: dict[str, dict]) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[str]]]:
    """Per Mac the (model, path) it lacks or holds with other bytes (its read: status.mac_rows), and the Hub
    entries it holds every file of but not as present (their ref lost or naming another commit)."""
    found, finish = {}, {}
    for mac, held in facts.items():
        for row in status.mac_rows(mac, manifests, held):
            lacking = row["missing"] + sorted(row["differing"])
            found.setdefault(mac, []).extend((row["model"], path) for path in lacking)
            if row["source"] == "hub" and not row["present"] and not lacking:
                finish.setdefault(mac, []).append(row["model"])
    return found, finish


def plan(manifests: list[dict], facts: dict[str, dict], macs: list[str], links: list[Link], port: int,
         fetcher: str | None = None) -> SyncPlan:
    """The sync of MANIFESTS to the Macs read (FACTS: mac -> model_files_facts, deep), MACS in the inventory's
    order, along LINKS (the cluster model's cables with their addresses); FETCHER: the Mac that fetches the Hub
    entries' files no Mac holds (None: the controller does)."""
    found = SyncPlan(port)
    found.sizes = {(m["name"], f["path"]): f["size"] for m in manifests for f in m["files"]}
    lacking, found.finish = needs(manifests, facts)
    for mac in macs:
        needed = sum(found.sizes[key] for key in lacking.get(mac, []))
        free = min((m.get("free_bytes") or 0 for m in facts.get(mac, {}).get("models", [])), default=0)
        if needed > free:
            found.short_of_space.append({"mac": mac, "needed": needed, "free": free})
    if found.short_of_space:
        return found
    neighbours = {}
    for mac, other in cable_addresses(links):
        neighbours.setdefault(mac, []).append(other)
    read = [mac for mac in macs if mac in facts]
    fetched_by = {m["name"]: fetcher or CONTROLLER for m in manifests if m["source"] == HUB}
    for key in found.sizes:
        wanting = [mac for mac in read if key in lacking.get(mac, [])]
        if wanting:
            _route(found, key, [mac for mac in read if mac not in wanting], wanting, neighbours,
                   fetched_by.get(key[0]))
    return found


def _route(found: SyncPlan, key: tuple[str, str], holders: list[str], wanting: list[str],
           neighbours: dict[str, list[str]], fetched_by: str | None) -> None:
    """Give each Mac WANTING the file KEY a sender: a neighbour nearer a holder along the cables, else the
    controller, which then feeds the first Mac that lacks it, and the walk goes on from there. FETCHED_BY (a Hub
    entry's file): where it is fetched from the Hub, the controller or a Mac; that Mac then fetches the file instead,
    and a Mac the walk does not reach from it is cut off."""
    model, path = key
    fetcher = None if fetched_by in (None, CONTROLLER) else fetched_by
    left = list(wanting)
    reached = set(holders)
    queue = deque(holders)
    while left:
        if not queue:
            if fetcher and fetcher not in left:  # it holds the file, did not answer, or fed every Mac it reaches
                found.cut_off.setdefault(model, set()).update(left)
                return
            root = fetcher or left[0]
            if fetched_by:
                found.fetched[model] = fetched_by
            found.pulls.setdefault(root, {}).setdefault(HUB_SENDER if fetcher else CONTROLLER, []).append(
                {"model": model, "path": path})
            left.remove(root)
            reached.add(root)
            queue.append(root)
        mac = queue.popleft()
        for other in sorted(neighbours.get(mac, [])):
            if other in reached or other not in left:
                continue  # only a Mac that holds the file or will hold it passes it on
            reached.add(other)
            queue.append(other)
            left.remove(other)
            found.pulls.setdefault(other, {}).setdefault(mac, []).append({"model": model, "path": path})
            found.serves.setdefault(mac, set()).add(other)
