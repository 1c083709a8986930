"""The watch (docs/watch.md): what one probe of the Macs says, judged against what the last converge
recorded and against the round before, as findings and as events that say each change once.

Input per Mac: the outputs of the probe's reads (PROBE_READS, the bounded ``ibv_devinfo`` and the
environment's fingerprint file), parsed with the collection's parsers (module_utils.macos_parsers
and node_facts, the same code the modules run); a format they do not know is a warning quoting it,
never a failure of the Mac. The baseline is the output folder's records: the address ledger
(the cluster model, cluster.json: every cable and its /30), the RDMA ledger (the Macs seen ready) and the
fabric's bridge setting. The probe's process list (mlx_fleet.jobs.READ) gives the orphaned MLX jobs. Pure Python: the CLI (mlx_fleet.watch_cli) reaches the Macs and writes the files.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from dataclasses import dataclass, field, replace

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import COMPETING_DAEMON_READS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import facts as judges
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding, cleared, statement
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.facts import FIX_RECOVERY
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Link, Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet import jobs

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
    """A fix command of the audit's (plugin_utils.base.fixes): watch is a command of the CLI."""
    return fixes.fill(template, inventory, cli=True)


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


# --- one Mac ----------------------------------------------------------------------------------------


def observe(reads: dict[str, tuple[int, str]], env_path: str = "") -> dict:
    """One Mac's record from its reads (name -> (exit status, stdout)); what cannot be read is None
    with a warning, never an exception. ENV_PATH: the cluster's environment, whose orphaned jobs it keeps."""
    warnings: list[str] = []
    listed = jobs.jobs_in("", reads, env_path)
    warnings += listed.warnings + ([listed.error] if listed.error and "ps" in reads else [])

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
        thunderbolt = node_facts.thunderbolt(node_facts.OutsideModule(), results)
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
        "orphans": [job for job in listed.jobs if job["orphan"]],
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


Key = tuple  # (kind, what it is about: a Port, a Cable, a Mac's name, or None)


def key(finding: Finding) -> Key:
    """What names a finding across rounds (one event when it appears, one when it clears): its kind and what it
    is about, a port, else a cable, else a Mac."""
    if len(finding.ports) == 1:
        return finding.kind, finding.ports[0]
    if finding.cable:
        return finding.kind, finding.cable
    return finding.kind, finding.hosts[0] if len(finding.hosts) == 1 else None


def key_text(found: Key) -> str:
    """A key as status.json and the events name it: "cable a:1 -- b:2", "no-ipv4 b:2", "sleep mini-1"."""
    kind, subject = found
    return kind if subject is None else f"{kind} {subject}"


def assess(baseline: Baseline, macs: dict[str, dict]) -> dict[Key, Finding]:
    """Everything wrong now, by key: the judges (plugin_utils.judge.facts) over what each Mac said."""
    up = [h for h in baseline.hosts if macs.get(h, {}).get("up")]
    found = [judges.unreachable(h, macs.get(h, {}).get("error", "")) for h in baseline.hosts if h not in up]
    found += _cables(baseline, macs)
    for host in up:
        found += _mac(baseline, host, macs[host])
    found += [judges.fast_synch(baseline.hosts, baseline.hostfile_envs),
              judges.same_build({h: macs[h]["build"] for h in up if macs[h].get("build")}),
              judges.same_environment({h: macs[h]["fingerprint"] for h in up if macs[h].get("fingerprint")})]
    return {key(f): replace(f, fix=_fix(f.fix, baseline.inventory)) for f in found if f}


def _mac(baseline: Baseline, host: str, mac: dict) -> list[Finding | None]:
    bridge = mac.get("bridge")
    return [judges.bridge(host, bridge, baseline.bridge) if bridge else None,
            judges.stale_rdma(host, mac.get("rdma_stale"))
            or judges.rdma_off(host, mac.get("rdma_enabled"), host in baseline.rdma_ready),
            judges.sleep(host, mac.get("power")),
            judges.service_order(host, mac.get("services")),
            judges.default_route(host, mac.get("default_route"), mac.get("services"),
                                 [p["device"] for p in mac.get("ports", [])]),
            judges.filevault(host, mac.get("filevault")),
            judges.network_manager(host, mac.get("competing")),
            *jobs.orphan_ranks(host, mac.get("orphans", []))]


def _cables(baseline: Baseline, macs: dict[str, dict]) -> list[Finding | None]:
    """The last converge's cables between Macs whose ports were read: moved, out, slow, and their ends'
    addresses and RDMA ports; and the cables found that it did not configure."""
    read = {h for h in baseline.hosts if macs.get(h, {}).get("up") and macs[h].get("bridge") is not None}
    owner = {p["domain_uuid"]: Port(h, p["receptacle"]) for h in read for p in macs[h]["ports"]}
    links = {link.cable.key: link for link in links_found(baseline.hosts, macs)}
    # A Mac down says it; a Mac whose ports could not be read has a warning.
    last = [item for item in baseline.cables if {item.a.host, item.b.host} <= read]
    rewired = judges.rewired([item.cable for item in last], [link.cable for link in links.values()])
    found: list[Finding | None] = list(rewired.findings)
    ready = set(baseline.rdma_ready)
    for item in sorted(last, key=lambda i: i.cable.key):
        cable = item.cable
        if cable.key in rewired.moved:
            continue
        link = links.get(cable.key)
        if link is None:
            found.append(judges.cable_out(cable, ", ".join(
                f"{port_name(end)} sees {_seen(macs[end.host], end.receptacle, owner)}"
                for end in (cable.a, cable.b))))
            continue
        found.append(judges.slow(cable, link.speed_gbps, _rated(baseline, (cable.a.host, cable.b.host))))
        for end in (item.a, item.b):
            mac = macs[end.host]
            port = _port(mac, end.receptacle) or {"receptacle": end.receptacle}
            found += [judges.port_address(end.host, end.receptacle, port.get("device"), port.get("inet", []),
                                          end.interface, cable=cable),
                      judges.rdma_gid(end.host, port, port.get("inet", []), cable=cable)
                      if mac.get("rdma_enabled") else None,
                      judges.rdma_port(end.host, port, enabled=mac.get("rdma_enabled"),
                                       seen_ready=end.host in ready, cable=cable)]
    return found


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
            "cable": str(finding.cable or "") if finding else "",
            "ports": [[p.host, p.receptacle] for p in finding.ports] if finding else [],
            "key": key or f"{kind} {' '.join(macs)}"}


def events(before: dict[Key, Finding], now: dict[Key, Finding]) -> list[dict]:
    """The findings that appeared (state "new") and those gone (state "cleared"), each once."""
    found = [_event(f.kind, statement(f), f.fix, list(f.hosts), "new", f, key_text(k))
             for k, f in now.items() if k not in before]
    gone = [_event(f.kind, cleared(f), "", list(f.hosts), "cleared", f, key_text(k))
            for k, f in before.items() if k not in now]
    return gone + found


def findings_data(findings: dict[Key, Finding]) -> dict:
    """Findings for status.json: each as data, with its sentence and what is said once it clears."""
    return {key_text(k): {"key": key_text(k), **f.to_dict(), "message": statement(f), "cleared": cleared(f), "macs": list(f.hosts)}
            for k, f in findings.items()}


def findings_from(data: dict) -> dict[Key, Finding]:
    """Findings read back from status.json."""
    return {key(found): found for found in (Finding.from_dict(value) for value in data.values())}
