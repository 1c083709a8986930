# -*- coding: utf-8 -*-
"""The Thunderbolt ports' network services: what thunderbolt_network reads (the services' configurations, its
record) and the pure plan of what must change. The module plans with it before it writes, and the controller
with the same functions from a Mac's preflight read (mlx_fleet_network, macos_facts), so a converged Mac's
network step is skipped without a module run. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import json
import os
import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import thunderbolt_last
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import run_concurrently

__metaclass__ = type

BRIDGE_DEVICE = "bridge0"
RECORD_VERSION = 1
# Where thunderbolt_network records what it changed (its option record's default).
RECORD = "/Library/Application Support/mlx-fleet/thunderbolt-network.json"
# Restoring a previous IPv4 method; other methods are reported, not restored.
RESTORE_METHOD = {"DHCP": ["-setdhcp"], "BOOTP": ["-setbootp"], "Off": ["-setv4off"]}


class PlanError(ValueError):
    """A request this Mac cannot satisfy; the message names the port and the fix."""


# --- pure logic: what must change -----------------------------------------------------------------

def mask_of(prefix):
    return str(ipaddress.IPv4Network("0.0.0.0/{0}".format(prefix)).netmask)


def check_ports(ports, hardware_ports):
    """Validate the requested ports against this Mac's hardware ports; returns them normalised."""
    by_name = dict((p["hardware_port"], p["device"]) for p in hardware_ports)
    by_device = dict((p["device"], p["hardware_port"]) for p in hardware_ports)
    thunderbolt = ", ".join("Thunderbolt {0} = {1}".format(n, d)
                            for n, d in sorted(parsers.thunderbolt_interfaces(hardware_ports).items()))
    seen_ports, seen_devices, seen_addresses = set(), set(), set()
    checked = []
    for port in ports:
        name, device = port["hardware_port"], port["device"]
        label = "{0} ({1})".format(name, device)
        # The device's own hardware port first: "en0" sent as "Thunderbolt 1" is still Ethernet.
        other = next((p for p in (by_device.get(device), name) if p and not parsers.is_thunderbolt_port(p)), None)
        if other:
            raise PlanError("{0} ({1}): not a Thunderbolt port; thunderbolt_network configures only Thunderbolt "
                            "ports (this Mac's: {2}); fix the cable plan (mlx_fleet_cables) so it names them"
                            .format(device, other, thunderbolt or "none"))
        if name not in by_name:
            raise PlanError("{0}: this Mac has no hardware port '{1}' (its Thunderbolt ports: {2}); fix the "
                            "cable plan (mlx_fleet_cables) or the host's model so it names a port this Mac has"
                            .format(label, name, thunderbolt or "none"))
        if by_name[name] != device:
            raise PlanError("{0}: on this Mac {1} is {2}, not {3} (networksetup -listallhardwareports); "
                            "use device {2}".format(label, name, by_name[name], device))
        prefix = port.get("prefix")
        prefix = 30 if prefix is None else prefix
        if not 8 <= prefix <= 31:
            raise PlanError("{0}: prefix {1} is not a point-to-point network; use 30 (or 31)".format(label, prefix))
        try:
            address = ipaddress.IPv4Address(port["address"])
            peer = ipaddress.IPv4Address(port["peer"])
        except ValueError as exc:
            raise PlanError("{0}: {1}; give IPv4 addresses such as 192.168.77.1".format(label, exc))
        network = ipaddress.IPv4Network("{0}/{1}".format(address, prefix), strict=False)
        usable = list(network) if prefix == 31 else list(network.hosts())
        for what, value in (("address", address), ("peer", peer)):
            if value not in usable:
                raise PlanError("{0}: {1} {2} is not a host address of {3}; give both ends of the cable "
                                "host addresses of the same /{4}".format(label, what, value, network, prefix))
        if address == peer:
            raise PlanError("{0}: address and peer are both {1}; each end of the cable needs its own".format(
                label, address))
        for seen, value in ((seen_ports, name), (seen_devices, device), (seen_addresses, str(address))):
            if value in seen:
                raise PlanError("{0}: {1} is listed twice; list each port once".format(label, value))
            seen.add(value)
        checked.append({"hardware_port": name, "device": device, "address": str(address), "prefix": prefix,
                        "mask": mask_of(prefix), "peer": str(peer)})
    return checked


def service_for(port, services):
    """The service of a port's hardware port: the one named like it, else the first in order."""
    mine = [s for s in services if s.get("hardware_port") == port["hardware_port"]]
    named = [s for s in mine if s["name"] == port["hardware_port"]]
    return (named or mine or [None])[0]


def ipv4_of(info):
    """A parsed `networksetup -getinfo` -> {method, address, mask, router}; only Manual keeps the values.

    method is None when the output names no method (IPv4 off, as far as is known).
    """
    method = info.get("configuration")
    if method == "Manual":
        return {"method": "Manual", "address": info.get("ip_address"), "mask": info.get("subnet_mask"),
                "router": info.get("router")}
    return {"method": method, "address": None, "mask": None, "router": None}


def snapshot(service, info, routes):
    """A service's restorable configuration."""
    return {"enabled": bool(service["enabled"]), "ipv4": ipv4_of(info), "routes": [list(r) for r in routes]}


def _covers(route, peer):
    try:
        network = ipaddress.IPv4Network("{0}/{1}".format(route[0], route[1]), strict=False)
    except ValueError:
        return False
    return ipaddress.IPv4Address(peer) in network


def _route_args(routes):
    flat = []
    for route in routes:
        flat += list(route)
    return flat


def restorable(ipv4):
    """Whether networksetup can set this IPv4 configuration again."""
    return ipv4["method"] == "Manual" or ipv4["method"] in RESTORE_METHOD


def _config_commands(name, current, wanted):
    """networksetup calls that turn configuration `current` into `wanted` (both snapshots)."""
    commands = []
    if current["ipv4"] != wanted["ipv4"]:
        ipv4 = wanted["ipv4"]
        if ipv4["method"] == "Manual":
            commands.append(["-setmanual", name, ipv4["address"], ipv4["mask"]] + (
                [ipv4["router"]] if ipv4.get("router") else []))
        elif ipv4["method"] in RESTORE_METHOD:
            commands.append(RESTORE_METHOD[ipv4["method"]] + [name])
    if current["routes"] != wanted["routes"]:
        commands.append(["-setadditionalroutes", name] + _route_args(wanted["routes"]))
    if current["enabled"] != wanted["enabled"]:
        commands.append(["-setnetworkserviceenabled", name, "on" if wanted["enabled"] else "off"])
    return commands


def empty_record():
    return {"version": RECORD_VERSION, "created": {}, "previous": {}, "bridge": None}


def _bridge_service(services):
    return next((s for s in services if s.get("device") == BRIDGE_DEVICE), None)


def plan_present(ports, bridge, services, configs, record, exclusive=False):
    """What state=present must change.

    ports: check_ports() output; services: parsed -listnetworkserviceorder; configs:
    {service name: snapshot()} of the ports' existing services (and, with exclusive, of the recorded
    ones); record: the record so far; exclusive: the recorded services of ports not listed are put back.
    Returns (commands, new record, [per-service result], bridge result, [diff]).
    """
    record = json.loads(json.dumps(record))
    commands, results, diffs = [], [], []
    if exclusive:
        # A port the module configured that is no longer in the fabric (its cable moved or went): put back
        # as it was, so no address of an old cable stays behind. A port it never touched is not recorded.
        listed = set(p["hardware_port"] for p in ports)
        commands, results, diffs = _restore(record, services, configs,
                                            lambda entry: entry.get("hardware_port") not in listed)

    bridge_service = _bridge_service(services)
    bridge_result = {"service": None, "enabled": None}
    if bridge_service is not None:
        enabled = bridge_service["enabled"]
        if bridge != "unchanged" and enabled != (bridge == "enabled"):
            commands.append(["-setnetworkserviceenabled", bridge_service["name"], "on" if bridge == "enabled" else "off"])
            if record["bridge"] is None:
                record["bridge"] = {"service": bridge_service["name"], "enabled": enabled}
            diffs.append(_diff(bridge_service["name"], {"enabled": enabled}, {"enabled": not enabled}))
            enabled = not enabled
        bridge_result = {"service": bridge_service["name"], "enabled": enabled}

    names = set(s["name"] for s in services)
    for port in ports:
        service = service_for(port, services)
        name = service["name"] if service else port["hardware_port"]
        if service is None and name in names:
            raise PlanError("{0} ({1}): a network service named '{2}' exists for another hardware port; rename or "
                            "remove it (networksetup -renamenetworkservice / -removenetworkservice)".format(
                                port["hardware_port"], port["device"], name))
        current = configs.get(name) if service else None
        created = service is None
        base = current or {"enabled": True, "ipv4": {"method": "DHCP", "address": None, "mask": None, "router": None},
                           "routes": []}
        # No additional route to the peer: the service's address and mask make macOS install the
        # connected subnet route (address/prefix on this port), which is the route to the peer,
        # persistent and re-made at every boot. A host route to the peer with a gateway would point
        # it at a next hop (networksetup takes dest/mask/gateway tuples and configd installs them
        # with RTF_GATEWAY), and no next hop exists on a point-to-point cable. What is removed is
        # an additional route on this service that covers the peer and would steer it elsewhere.
        wanted = {
            "enabled": True,
            "ipv4": {"method": "Manual", "address": port["address"], "mask": port["mask"], "router": None},
            "routes": [r for r in base["routes"] if not _covers(r, port["peer"])],
        }
        steps = _config_commands(name, base, wanted)
        if created:
            commands.append(["-createnetworkservice", name, port["hardware_port"]])
            record["created"][name] = {"hardware_port": port["hardware_port"], "device": port["device"]}
        elif steps and name not in record["created"] and name not in record["previous"]:
            record["previous"][name] = dict(current, hardware_port=port["hardware_port"], device=port["device"])
        commands += steps
        results.append(dict(wanted, service=name, hardware_port=port["hardware_port"], device=port["device"],
                            created=created, changed=created or bool(steps)))
        if created or steps:
            diffs.append(_diff(name, current, wanted))
    return commands, record, results, bridge_result, diffs


def plan_live(results, listed, interfaces):
    """(ifconfig steps, diffs) that give every listed port (hardware port names) whose service is already configured
    (results of plan_present, changed False) exactly its service's address on the running interface: other IPv4
    addresses removed, the service's added when missing. A port whose service changes gets its address from macOS
    then; a service put back for a port no longer listed (exclusive) is left as it is.
    results are marked changed, with the addresses found (live_before)."""
    steps, diffs = [], []
    for port in results:
        if port["changed"] or port["hardware_port"] not in listed:
            continue
        wanted = ipaddress.IPv4Interface("{0}/{1}".format(port["ipv4"]["address"], port["ipv4"]["mask"])).with_prefixlen
        live = node_facts.port_addresses(interfaces, port["device"])
        if live == [wanted]:
            continue
        for stray in (a for a in live if a != wanted):
            steps.append([port["device"], "inet", str(ipaddress.IPv4Interface(stray).ip), "-alias"])
        if wanted not in live:
            steps.append([port["device"], "inet", port["ipv4"]["address"], "netmask", port["ipv4"]["mask"]])
        port.update(changed=True, live_before=live)
        diffs.append({"before_header": "{0} ({1}) addresses (before)".format(port["service"], port["device"]),
                      "after_header": "{0} ({1}) addresses (after)".format(port["service"], port["device"]),
                      "before": "".join(a + "\n" for a in live) or "none\n", "after": wanted + "\n"})
    return steps, diffs


def plan_order(services, created):
    """(the -ordernetworkservices step, its diff) that puts the Thunderbolt services last, or (None, None).

    created: the services this run creates (Thunderbolt ones, not listed yet): they go last too, and their
    creation is a change already, so the order is set with them whatever place macOS gives a new service.
    """
    now = [s["name"] for s in services]
    new = [name for name in created if name not in now]
    wanted = thunderbolt_last(services) + new
    if wanted == now:
        return None, None
    return ["-ordernetworkservices"] + wanted, {
        "before_header": "service order (before)", "after_header": "service order (after)",
        "before": "".join(name + "\n" for name in now), "after": "".join(name + "\n" for name in wanted)}


def _restore(record, services, configs, concerned):
    """Put back the recorded services whose record entry is concerned(entry), and forget them: the
    services the module created removed, the earlier ones configured as they were.
    Returns (commands, [per-service result], [diff]); record is changed in place."""
    commands, results, diffs = [], [], []
    existing = dict((s["name"], s) for s in services)
    for name in sorted(record["created"]):
        entry = record["created"][name]
        if not concerned(entry):
            continue
        if name in existing:
            commands.append(["-removenetworkservice", name])
            diffs.append(_diff(name, configs.get(name) or {"enabled": existing[name]["enabled"]}, None))
        results.append({"service": name, "hardware_port": entry["hardware_port"], "device": entry.get("device"),
                        "removed": name in existing, "changed": name in existing})
        del record["created"][name]
    for name in sorted(record["previous"]):
        entry = record["previous"][name]
        if not concerned(entry):
            continue
        wanted = {"enabled": entry["enabled"], "ipv4": entry["ipv4"], "routes": entry["routes"]}
        steps, warning = [], None
        if name in existing and name in configs:
            steps = _config_commands(name, configs[name], wanted)
            commands += steps
            if steps:
                diffs.append(_diff(name, configs[name], wanted))
            if not restorable(wanted["ipv4"]) and configs[name]["ipv4"] != wanted["ipv4"]:
                warning = ("{0} ({1}): its IPv4 configuration before mlx-fleet ({2}) cannot be put back with "
                           "networksetup, so it stays {3}; set it in System Settings > Network".format(
                               name, entry.get("device"), wanted["ipv4"]["method"] or "no method named by "
                               "networksetup -getinfo", ipv4_text(configs[name]["ipv4"])))
        results.append(dict(wanted, service=name, hardware_port=entry["hardware_port"], device=entry.get("device"),
                            restored=bool(steps), changed=bool(steps), warning=warning))
        del record["previous"][name]
    return commands, results, diffs


def plan_absent(ports, bridge, services, configs, record):
    """What state=absent must change to put back what the record says was changed.

    ports: the (hardware port names) to restore, empty for all; configs: {name: snapshot()} of
    the recorded pre-existing services. Returns the same tuple as plan_present.
    """
    record = json.loads(json.dumps(record))
    wanted_ports = set(p["hardware_port"] for p in ports)
    commands, results, diffs = _restore(record, services, configs,
                                        lambda entry: not wanted_ports or entry.get("hardware_port") in wanted_ports)

    bridge_service = _bridge_service(services)
    bridge_result = {"service": bridge_service["name"] if bridge_service else None,
                     "enabled": bridge_service["enabled"] if bridge_service else None}
    if bridge_service is not None and bridge != "unchanged" and not record["created"] and not record["previous"]:
        # As recorded; with nothing recorded mlx-fleet never changed it, so it stays as it is.
        target = bridge_service["enabled"]
        if bridge == "enabled":
            target = True
        elif record["bridge"] is not None:
            target = record["bridge"]["enabled"]
        if bridge_service["enabled"] != target:
            commands.append(["-setnetworkserviceenabled", bridge_service["name"], "on" if target else "off"])
            diffs.append(_diff(bridge_service["name"], {"enabled": bridge_service["enabled"]}, {"enabled": target}))
        bridge_result["enabled"] = target
        record["bridge"] = None
    return commands, record, results, bridge_result, diffs


def _union(old, new):
    """The record with the entries of both (the services still to put back and the new ones)."""
    merged = json.loads(json.dumps(new))
    for kind in ("created", "previous"):
        for name, entry in old[kind].items():
            merged[kind].setdefault(name, entry)
    return merged


def is_empty(record):
    return not record["created"] and not record["previous"] and record["bridge"] is None


def ipv4_text(ipv4):
    text = ipv4["method"] or "unknown"
    if ipv4["method"] == "Manual":
        text += " {0} mask {1} router {2}".format(ipv4["address"], ipv4["mask"], ipv4["router"] or "none")
    return text


def render(config):
    """Text of a service's configuration for --diff."""
    if config is None:
        return "service: absent\n"
    lines = ["enabled: {0}".format("yes" if config["enabled"] else "no")]
    if config.get("ipv4"):
        lines.append("ipv4: " + ipv4_text(config["ipv4"]))
    if "routes" in config:
        lines.append("additional routes: " + (", ".join(" ".join(r) for r in config["routes"]) or "none"))
    return "\n".join(lines) + "\n"


def _diff(name, before, after):
    return {"before_header": "{0} (before)".format(name), "after_header": "{0} (after)".format(name),
            "before": render(before), "after": render(after)}


# --- the Mac: reads, record, writes ---------------------------------------------------------------

def read_configs(module, services, names):
    """{name: snapshot} of the named existing services: -getinfo and -getadditionalroutes each."""
    configs = {}
    by_name = dict((s["name"], s) for s in services)
    names = [name for name in dict.fromkeys(names) if name in by_name]
    calls = [(option, name) for name in names for option in ("-getinfo", "-getadditionalroutes")]
    outputs = dict(zip(calls, run_concurrently(module, [("networksetup", option, name) for option, name in calls])))
    for name in names:
        texts = []
        for option in ("-getinfo", "-getadditionalroutes"):
            rc, out, err = outputs[option, name]
            if rc != 0:
                module.fail_json(msg="networksetup {0} {1} failed (exit {2}): {3}".format(
                    option, shlex.quote(name), rc, (err or out).strip()))
            texts.append(out)
        try:
            info = parsers.parse_network_service_info(texts[0])
            routes = parsers.parse_additional_routes(texts[1])
        except ValueError as exc:
            module.fail_json(msg="unexpected output: {0}".format(exc))
        configs[name] = snapshot(by_name[name], info, routes)
    return configs


class RecordError(ValueError):
    """The record cannot be read; the message says why and what to do."""


def load_record(path):
    """The record at path (empty when there is none); RecordError when it is not one."""
    if not os.path.exists(path):
        return empty_record()
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise RecordError("{0}: cannot read the record ({1}); move it aside to start afresh".format(
            path, to_native(exc)))
    if not isinstance(record, dict):
        raise RecordError("{0}: not a record (a JSON object); move it aside to start afresh".format(path))
    if record.get("version") != RECORD_VERSION:
        raise RecordError("{0}: record version {1} is not {2}".format(path, record.get("version"), RECORD_VERSION))
    return dict(empty_record(), **record)


def configs_to_read(ports, exclusive, services, record):
    """The services whose configuration state=present compares: the ports' (check_ports), and with exclusive the
    recorded ones."""
    names = [s["name"] for s in (service_for(p, services) for p in ports) if s]
    return names + (sorted(record["previous"]) if exclusive else [])


def configs_to_read_ahead(services, record, interfaces):
    """What a read before the fabric is planned compares (the preflight's): the recorded services, and the
    Thunderbolt services whose port holds an IPv4 address, as every port of a converged Mac's fabric does. A planned
    port whose service is not read makes the network step run there (plugin_utils.fabric.network_step), so a port
    left out here can never make it skip."""
    addressed = [s["name"] for s in services if parsers.is_thunderbolt_port(s.get("hardware_port") or "")
                 and node_facts.port_addresses(interfaces, s.get("device"))]
    return addressed + sorted(record["previous"])


def plan_state(params, mac):
    """The plan of state=present from what was read (MAC: hardware_ports, services, configs, record, interfaces):
    the ports' services and the bridge, the live addresses, the service order. PlanError when the ports cannot be.
    PARAMS: thunderbolt_network's ports, bridge, exclusive and services_last."""
    services, record = mac["services"], mac["record"]
    ports = check_ports(params["ports"], mac["hardware_ports"])
    commands, new_record, results, bridge, diffs = plan_present(ports, params["bridge"], services, mac["configs"],
                                                                record, params["exclusive"])
    live_steps, live_diffs = plan_live(results, set(p["hardware_port"] for p in ports), mac["interfaces"])
    diffs += live_diffs
    if params["services_last"]:
        # The order of what is left: a service this run removes (a port whose cable left) is no longer there.
        removed = set(command[1] for command in commands if command[0] == "-removenetworkservice")
        step, diff = plan_order([s for s in services if s["name"] not in removed],
                                [r["service"] for r in results if r.get("created")])
        if step:
            commands.append(step)
            diffs.append(diff)
    # Recorded before any write: a run that fails half-way still knows what it may have created.
    return {"commands": commands, "live_steps": live_steps, "results": results, "bridge": bridge, "diffs": diffs,
            "record_first": _union(record, new_record), "record": new_record}


def writes(plan, record):
    """Whether applying the plan writes anything (a record that only forgets entries included)."""
    return bool(plan["commands"] or plan["live_steps"] or plan["record"] != record)
