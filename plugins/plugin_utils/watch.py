"""The watch (docs/watch.md): what one probe of the Macs says, judged against what the last converge
recorded and against the round before, as findings and as events that say each change once.

Input per Mac: the outputs of the probe's reads (PROBE_READS, the bounded ``ibv_devinfo`` and the
environment's fingerprint file), parsed with the collection's parsers (module_utils.macos_parsers
and node_facts, the same code the modules run); a format they do not know is a warning quoting it,
never a failure of the Mac. The baseline is the output folder's records: the address ledger
(the cluster model, cluster.json: every cable and its /30), the RDMA ledger (the Macs seen ready) and the
fabric's bridge setting. Pure Python: the CLI (mlx_fleet.watch_cli) reaches the Macs and writes the files.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from dataclasses import asdict, dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import COMPETING_DAEMON_READS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import field_checks, fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.audit import (
    FIX_CONVERGE, FIX_ENV, FIX_NODE, FIX_RECOVERY)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_discovery import discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.ports import Cable, Link, Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma_state import ACTIVE

FORMAT = "mlx-fleet-watch/1"
# What the probe reads (macos_commands.READS): the ports and RDMA as the modules read them, and the rest;
# ibv_devinfo runs bounded: it hangs on a wedged RDMA stack.
PROBE_READS = ("sw_vers", "boottime", "pmset") + node_facts.THUNDERBOLT_READS + (
    "default_route", "filevault") + tuple(COMPETING_DAEMON_READS)
BOUNDED_READS = ("ibv_devinfo",)
FINGERPRINT_READ = "fingerprint"  # the environment's fingerprint file (module_utils.mlx_env.fingerprint_path)
TIMED_OUT = 124  # the bounded read's exit status when it did not finish
REBOOT_SLACK = 5  # seconds kern.boottime may move without a reboot (clock adjustments)


def _fix(template: str, inventory: str) -> str:
    """A fix command of the audit's (plugin_utils.fixes): watch is a command of the CLI."""
    return fixes.fill(template, inventory, cli=True)


@dataclass
class Finding:
    """Something wrong now; ``key`` names it across rounds (one event when it appears, one when it clears)."""

    key: str
    kind: str  # down, cable, slow, extra-cable, bridge, no-ipv4, rdma-off, rdma-port, rdma-gid, stale-rdma,
    # os-mismatch, environment-mismatch, sleep
    message: str
    fix: str
    cleared: str  # what is said when it is gone
    macs: list[str]
    cable: Cable | None = None  # the cable it is about, ends as in the cluster model (lower end first)

    @property
    def ports(self) -> list[list]:
        """The cable's ends as [host, Thunderbolt port] pairs (status.json and the events carry them)."""
        return self.cable.ports if self.cable else []


@dataclass
class Baseline:
    """What the last converge recorded (the output folder) and the inventory declares."""

    hosts: list[str]
    cables: list[Link] = field(default_factory=list)  # the last converge's (cluster_model.last_links)
    rdma_ready: list[str] = field(default_factory=list)  # Macs the RDMA ledger saw ready
    models: dict[str, str] = field(default_factory=dict)  # host -> mlx_fleet_model
    bridge: str = "disabled"  # mlx_fabric_bridge
    inventory: str = "INVENTORY"
    hostfile_envs: list[str] = field(default_factory=list)  # hostfile.json's envs


class _Reads:
    """The module interface node_facts expects, on the controller: a failure is a ValueError."""

    def fail_json(self, msg, **_):
        raise ValueError(msg)

    def warn(self, msg):
        pass


# --- one Mac ----------------------------------------------------------------------------------------


def observe(reads: dict[str, tuple[int, str]]) -> dict:
    """One Mac's record from its reads (name -> (exit status, stdout)); what cannot be read is None
    with a warning, never an exception."""
    warnings: list[str] = []

    def parsed(name, parser):
        rc, text = reads.get(name, (None, ""))
        if rc is None:
            warnings.append(f"{name}: no output (the probe stopped before it)")
            return None
        if rc != 0:
            warnings.append(f"{name}: exit status {rc}: {text.strip()[:200]!r}")
            return None
        try:
            return parser(text)
        except ValueError as exc:
            warnings.append(f"{name}: unknown output ({exc})")
            return None

    sw = parsed("sw_vers", parsers.parse_sw_vers)
    pmset = parsed("pmset", parsers.parse_pmset) or {}
    power = pmset.get("AC Power") or next(iter(pmset.values()), None)
    stale = reads.get("ibv_devinfo", (0, ""))[0] == TIMED_OUT
    results = {name: (rc, text, "") for name, (rc, text) in reads.items()}
    if stale:  # no devices to look at: the ports' RDMA states stay unknown
        results["ibv_devices"] = (node_facts.MISSING, "", "")
    thunderbolt = None
    try:
        thunderbolt = node_facts.thunderbolt(_Reads(), results)
    except (ValueError, KeyError) as exc:
        warnings.append(f"Thunderbolt: cannot be read ({exc})")
    interfaces = parsed("ifconfig", parsers.parse_ifconfig) if thunderbolt else None
    fingerprint = None
    rc, text = reads.get(FINGERPRINT_READ, (1, ""))
    if rc == 0:
        try:
            fingerprint = json.loads(text).get("digest")
        except (ValueError, AttributeError, RecursionError):
            warnings.append(f"{FINGERPRINT_READ}: not JSON: {text.strip()[:200]!r}")
        if not isinstance(fingerprint, (str, type(None))):
            warnings.append(f"{FINGERPRINT_READ}: its digest is no string: {fingerprint!r:.200}")
            fingerprint = None
    ports = []
    for port in (thunderbolt or {}).get("ports", []):
        inet = (interfaces or {}).get(port["device"] or "", {}).get("inet", [])
        ports.append({key: port.get(key) for key in (
            "receptacle", "device", "domain_uuid", "connected", "speed_gbps", "speed_is_max", "peers", "devices",
            "rdma_device", "rdma_state", "rdma_gids")} | {"inet": [f"{a['address']}/{a['prefixlen']}" for a in inet]})
    booted = parsed("boottime", parsers.parse_kern_boottime)
    try:
        booted_at = _when(booted) if booted else None
    except (ValueError, OverflowError, OSError):  # a date past what a clock shows (year 10000 and on)
        warnings.append(f"boottime: not a date: {booted}")
        booted = booted_at = None
    route = reads.get("default_route", (1, ""))
    try:
        default_route = parsers.parse_route_get(route[1])["interface"] if route[0] == 0 else None
    except ValueError:
        default_route = None  # no default route: route -n get prints no interface
    return {
        "up": True,
        "error": "",
        "build": f"{sw['product_version']} ({sw['build_version']})" if sw else None,
        "booted": booted,
        "booted_at": booted_at,
        "power": power,
        "fingerprint": fingerprint,
        "bridge": (thunderbolt or {}).get("bridge"),
        "rdma_enabled": (thunderbolt or {}).get("rdma_enabled"),
        "rdma_stale": stale,
        "ports": ports,
        "services": parsed("service_order", parsers.parse_network_service_order) or [],
        "default_route": default_route,
        "filevault": parsed("filevault", parsers.parse_fdesetup_status),
        # A launchctl print that exits 0 is a loaded job (113: not loaded).
        "competing": sorted(label for name, label in COMPETING_DAEMON_READS.items() if reads.get(name, (1,))[0] == 0),
        "warnings": warnings,
    }


def unreachable(error: str) -> dict:
    return {"up": False, "error": error, "warnings": []}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# What changes() reads of an earlier reading of a Mac, in the shapes observe() gives it: a record read back
# (status.json's last_good) is checked against them.
RECORD_SHAPES = {
    "up": lambda v: isinstance(v, bool),
    "booted": lambda v: v is None or _number(v),
    "build": lambda v: v is None or isinstance(v, str),
    "fingerprint": lambda v: v is None or isinstance(v, str),
    "rdma_enabled": lambda v: v is None or isinstance(v, bool),
    "power": lambda v: v is None or isinstance(v, dict),
}


def earlier(records) -> tuple[dict[str, dict], list[str]]:
    """Earlier readings of the Macs read back (status.json's last_good): a record that is no object, or a field
    of another shape than observe() gives it, is left out (the Mac's next reading replaces it); what was left
    out, by name."""
    if not isinstance(records, dict):
        return {}, ["last_good"] if records is not None else []
    kept, left_out = {}, []
    for host, record in records.items():
        if not isinstance(record, dict):
            left_out.append(f"last_good {host}")
            continue
        wrong = [name for name, fits in RECORD_SHAPES.items() if name in record and not fits(record[name])]
        left_out += [f"last_good {host} {name}" for name in wrong]
        kept[host] = {name: value for name, value in record.items() if name not in wrong}
    return kept, left_out


# --- the cluster --------------------------------------------------------------------------------------


def links_found(hosts: list[str], macs: dict[str, dict]) -> list[Link]:
    """The direct cables between the Macs that answered (fabric_discovery, as converge finds them)."""
    up = [h for h in hosts if macs.get(h, {}).get("up") and macs[h].get("bridge") is not None]
    return discover(up, {h: macs[h] for h in up})[0]


def _port(mac: dict, number: int) -> dict | None:
    return next((p for p in mac.get("ports", []) if p["receptacle"] == number), None)


def _seen(mac: dict, receptacle: int, owner: dict[str, Port]) -> str:
    """What a port sees, in words."""
    port = _port(mac, receptacle)
    if port is None:
        return "no such port"
    if not port["connected"]:
        return "no link"
    peers = [owner.get(p["domain_uuid"]) for p in port["peers"] if p.get("direct")]
    named = [port_name(peer) for peer in filter(None, peers)]
    return f"a link to {', '.join(named)}" if named else "a link to something else (a dock, a drive or a Mac outside)"


def _rated(baseline: Baseline, hosts: tuple[str, ...]) -> int:
    generations = [MODELS[baseline.models[h]].tb_generation for h in hosts if baseline.models.get(h) in MODELS]
    return 40 if 4 in generations else 80


def assess(baseline: Baseline, macs: dict[str, dict]) -> dict[str, Finding]:
    """Everything wrong now, by key."""
    inventory = baseline.inventory
    found: dict[str, Finding] = {}

    def add(finding: Finding) -> None:
        found[finding.key] = finding

    up = {h for h in baseline.hosts if macs.get(h, {}).get("up")}
    for host in baseline.hosts:
        if host not in up:
            error = macs.get(host, {}).get("error") or "not probed"
            add(Finding(f"down {host}", "down", f"{host} is down: it does not answer over ssh ({error})",
                        f"check that {host} is on, awake and on the network (its network cable, Wi-Fi), then "
                        f"`ssh {host}`", f"{host} is back: it answers over ssh", [host]))
    read = {h for h in up if macs[h].get("bridge") is not None}  # the Thunderbolt reads parsed
    owner = {p["domain_uuid"]: Port(h, p["receptacle"]) for h in read for p in macs[h]["ports"]}
    links = {link.cable.key: link for link in links_found(baseline.hosts, macs)}
    ready = set(baseline.rdma_ready)
    for last in sorted(baseline.cables, key=lambda item: str(item.cable)):
        cable = last.cable
        a, b = cable.a, cable.b
        if not {a.host, b.host} <= read:
            continue  # a Mac down says it; a Mac whose ports could not be read has a warning
        link = links.get(cable.key)
        if link is None:
            add(Finding(
                f"cable {cable}", "cable",
                f"cable {cable} is out: {port_name(a)} sees {_seen(macs[a.host], a.receptacle, owner)}, "
                f"{port_name(b)} sees {_seen(macs[b.host], b.receptacle, owner)}",
                f"plug the cable between {port_name(a)} and {port_name(b)} back in firmly "
                f"at both ends, or replace it; if it was moved on purpose: {_fix(FIX_CONVERGE, inventory)}",
                f"cable {cable} is back", [a.host, b.host], cable))
            continue
        rated = _rated(baseline, (a.host, b.host))
        if link.speed_gbps < rated:
            add(Finding(f"slow {cable}", "slow", f"cable {cable} links at {link.speed_gbps:g} Gb/s where these "
                        f"Macs do {rated} Gb/s", "replace it with a Thunderbolt 5 cable (a Thunderbolt 4 or a "
                        "damaged cable links at 40 Gb/s)", f"cable {cable} is back at {rated} Gb/s",
                        [a.host, b.host], cable))
        for end, address in zip((a, b), (last.a.address, last.b.address)):
            port = _port(macs[end.host], end.receptacle) or {}
            addresses = [i.split("/")[0] for i in port.get("inet", [])]
            if address not in addresses:
                add(Finding(f"no-ipv4 {end}", "no-ipv4",
                            f"{port_name(end)} ({port.get('device')}) has "
                            f"{', '.join(port.get('inet', [])) or 'no IPv4 address'} where the fabric gave it "
                            f"{address} (cable {cable})", _fix(FIX_CONVERGE, inventory),
                            f"{port_name(end)} has its address {address} again", [end.host], cable))
            gid = field_checks.rdma_gid(port, port.get("inet", [])) if macs[end.host].get("rdma_enabled") else ""
            if gid:
                add(Finding(f"rdma-gid {end}", "rdma-gid", f"{port_name(end)}: {gid}",
                            _fix(field_checks.RDMA_GID_FIX, inventory),
                            f"{port_name(end)}: RDMA port has its IPv4-mapped GID again",
                            [end.host], cable))
            if macs[end.host].get("rdma_enabled") and port.get("rdma_device") and port.get("rdma_state") not in (
                    None, ACTIVE) and end.host in ready:
                add(Finding(f"rdma-port {end}", "rdma-port",
                            f"{port_name(end)}: RDMA port {port['rdma_device']} is "
                            f"{port['rdma_state']} on a cable that links", f"reboot {end.host} (an RDMA port that "
                            "stays down on a linked cable comes back only with a restart)",
                            f"{port_name(end)}: RDMA port active again", [end.host], cable))
    found_cables = set(links) - {last.cable.key for last in baseline.cables}
    for cable in sorted((links[key].cable for key in found_cables), key=str) if baseline.cables else ():
        add(Finding(f"extra {cable}", "extra-cable", f"cable {cable} is not one the last converge configured",
                    f"{_fix(FIX_CONVERGE, inventory)} (or unplug it)", f"cable {cable} is gone",
                    [cable.a.host, cable.b.host], cable))
    for host in sorted(up, key=baseline.hosts.index):
        mac = macs[host]
        bridge = mac.get("bridge") or {}
        if baseline.bridge == "disabled" and (bridge.get("service_enabled") or (
                bridge.get("active") and bridge.get("members"))):
            members = ", ".join(bridge.get("members") or []) or "no ports"
            add(Finding(f"bridge {host}", "bridge", f"{host}: the Thunderbolt Bridge is on again (service "
                        f"{'enabled' if bridge.get('service_enabled') else 'disabled'}, bridge0 "
                        f"{'active' if bridge.get('active') else 'inactive'} with {members}); JACCL and the "
                        "fabric's addresses need it off", _fix(FIX_CONVERGE, inventory) +
                        " (the fabric step turns it off)", f"{host}: the Thunderbolt Bridge is off again", [host]))
        if mac.get("rdma_stale"):
            add(Finding(f"stale-rdma {host}", "stale-rdma", f"{host}: ibv_devinfo does not answer (RDMA is "
                        "wedged: jobs fail or hang in JACCL)", f"reboot {host}: a wedged RDMA stack comes back "
                        "only with a restart", f"{host}: ibv_devinfo answers again", [host]))
        elif host in ready and mac.get("rdma_enabled") is False:
            add(Finding(f"rdma-off {host}", "rdma-off", f"{host}: RDMA is off (rdma_ctl status: disabled), "
                        "where the last converge saw it ready", _fix(FIX_RECOVERY, inventory),
                        f"{host}: RDMA is on again", [host]))
        sleep = (mac.get("power") or {}).get("sleep")
        if isinstance(sleep, int) and sleep != 0:
            add(Finding(f"sleep {host}", "sleep", f"{host}: system sleep is {sleep} min (pmset sleep): an idle "
                        "Mac drops out of the cluster", _fix(FIX_NODE, inventory),
                        f"{host}: system sleep is off again", [host]))
        _field(host, mac, inventory, add)
    wrong = field_checks.fast_synch(baseline.hostfile_envs)
    if wrong:
        add(Finding("fast-synch", "fast-synch", f"hostfile.json: {wrong}", _fix(field_checks.FAST_SYNCH_FIX, inventory),
                    f"hostfile.json: {field_checks.FAST_SYNCH} is unset again", list(baseline.hosts)))
    builds = {h: macs[h]["build"] for h in baseline.hosts if h in up and macs[h].get("build")}
    if len(set(builds.values())) > 1:
        by_build: dict[str, list[str]] = {}
        for host, build in builds.items():
            by_build.setdefault(build, []).append(host)
        text = "; ".join(f"{build} on {', '.join(hosts)}" for build, hosts in sorted(by_build.items()))
        add(Finding("os-mismatch", "os-mismatch", f"the Macs run different macOS builds ({text}): RDMA breaks "
                    "across mixed builds", "update macOS so every Mac runs the same build",
                    "every Mac runs the same macOS build again", sorted(builds, key=baseline.hosts.index)))
    prints = {h: macs[h]["fingerprint"] for h in baseline.hosts if h in up and macs[h].get("fingerprint")}
    if len(set(prints.values())) > 1:
        groups: dict[str, list[str]] = {}
        for host, digest in prints.items():
            groups.setdefault(digest[:12], []).append(host)
        text = "; ".join(f"{digest} on {', '.join(hosts)}" for digest, hosts in sorted(groups.items()))
        add(Finding("environment-mismatch", "environment-mismatch", f"the Macs run different MLX environments "
                    f"(fingerprints {text})", _fix(FIX_ENV, inventory),
                    "every Mac runs the same MLX environment again", sorted(prints, key=baseline.hosts.index)))
    return found


def _field(host: str, mac: dict, inventory: str, add) -> None:
    """The service order, the default route, FileVault and other network managers (plugin_utils.field_checks)."""
    order = field_checks.service_order(mac.get("services"))
    if order:
        add(Finding(f"service-order {host}", "service-order", f"{host}: the Thunderbolt services are not last in the "
                    f"service order: {order}", field_checks.service_order_fix(mac["services"]),
                    f"{host}: the Thunderbolt services are last again", [host]))
    route = field_checks.default_route(mac.get("default_route"), [p["device"] for p in mac.get("ports", [])])
    if route:
        add(Finding(f"default-route {host}", "default-route", f"{host}: {route}",
                    field_checks.service_order_fix(mac.get("services") or []),
                    f"{host}: the default route is off Thunderbolt again", [host]))
    locked = field_checks.filevault(mac.get("filevault"))
    if locked:
        add(Finding(f"filevault {host}", "filevault", f"{host}: {locked}", field_checks.filevault_fix(host),
                    f"{host}: FileVault is off again", [host]))
    rival = field_checks.competing(mac.get("competing"))
    if rival:
        add(Finding(f"network-manager {host}", "network-manager", f"{host}: {rival}",
                    field_checks.competing_fix(mac["competing"]), f"{host}: no other network manager is loaded",
                    [host]))


def changes(baseline: Baseline, before: dict[str, dict], now: dict[str, dict]) -> list[dict]:
    """What happened to a Mac between two readings of it that is not a finding of its own: a reboot, a macOS
    update, another environment, other sleep settings, RDMA switched off on a Mac the RDMA ledger has not seen
    ready (for those it has, their rdma-off finding says it)."""
    events = []
    for host in baseline.hosts:
        old, new = before.get(host) or {}, now.get(host) or {}
        if not (old.get("up") and new.get("up")):
            continue
        if old.get("rdma_enabled") and new.get("rdma_enabled") is False and host not in baseline.rdma_ready:
            events.append(_event("rdma", f"{host}: RDMA was switched off (rdma_ctl status: disabled; an update does "
                                 "this)", _fix(FIX_RECOVERY, baseline.inventory), [host]))
        if old.get("booted") and new.get("booted") and new["booted"] > old["booted"] + REBOOT_SLACK:
            events.append(_event("reboot", f"{host} restarted (booted {_when(new['booted'])})",
                                 "nothing to do if it was planned; otherwise look at why (a power cut, a panic: "
                                 "Console's crash reports)", [host]))
        if old.get("build") and new.get("build") and old["build"] != new["build"]:
            events.append(_event("build", f"{host}: macOS changed from {old['build']} to {new['build']}",
                                 "check RDMA and the bridge (updates switch them): " + _fix("{audit}", baseline.inventory),
                                 [host]))
        if old.get("fingerprint") != new.get("fingerprint") and old.get("fingerprint") is not None:
            events.append(_event("environment", f"{host}: the MLX environment changed (fingerprint "
                                 f"{str(old['fingerprint'])[:12]} -> {str(new.get('fingerprint'))[:12]})",
                                 _fix("{audit} shows what; {env} puts the lock back", baseline.inventory), [host]))
        if old.get("power") and new.get("power") and old["power"] != new["power"]:
            moved = [f"{k} {old['power'].get(k)} -> {new['power'].get(k)}" for k in sorted(
                set(old["power"]) | set(new["power"])) if old["power"].get(k) != new["power"].get(k)]
            events.append(_event("power", f"{host}: sleep settings changed ({', '.join(moved)})",
                                 "the node play sets them back", [host]))
    return events


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(kind: str, message: str, fix: str, macs: list[str], state: str = "changed", finding: Finding | None = None,
           key: str = "") -> dict:
    return {"event": kind, "state": state, "message": message, "fix": fix, "macs": macs,
            "cable": str(finding.cable) if finding and finding.cable else "", "ports": finding.ports if finding else [],
            "key": key or f"{kind} {' '.join(macs)}"}


def events(before: dict[str, Finding], now: dict[str, Finding]) -> list[dict]:
    """The findings that appeared (state "new") and those gone (state "cleared"), each once."""
    found = [_event(f.kind, f.message, f.fix, f.macs, "new", f, key) for key, f in now.items() if key not in before]
    gone = [_event(f.kind, f.cleared, "", f.macs, "cleared", f, key) for key, f in before.items() if key not in now]
    return gone + found


def findings_data(findings: dict[str, Finding]) -> dict:
    """Findings for status.json: the cable as its text for a person, and its ends (ports) for programs."""
    return {key: {**asdict(f), "cable": str(f.cable) if f.cable else "", "ports": f.ports} for key, f in findings.items()}
