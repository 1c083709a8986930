# -*- coding: utf-8 -*-
"""Parsers for the macOS command outputs the toolkit reads.

Pure standard library, Python 3.9 compatible: this runs on the Mac's /usr/bin/python3.
Every parser takes the command's text output and returns plain dicts/lists; when the text is
not that command's format it raises ValueError naming the command, so a changed or failed
command is reported instead of being read as "nothing there".
Formats are pinned by the real captures in tests/fixtures/macos.
"""

from __future__ import absolute_import, division, print_function

import json
import re

__metaclass__ = type


def _fail(command, why):
    raise ValueError("{0}: {1}".format(command, why))


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


def _none_if_unset(value):
    # networksetup prints "none" or "(null)" for fields it has no value for.
    return None if value in ("", "none", "(null)") else value


# --- identity: sw_vers, sysctl, system_profiler SPHardwareDataType -----------------------------

_SW_VERS_KEYS = {"ProductName": "product_name", "ProductVersion": "product_version",
                 "BuildVersion": "build_version"}


def parse_sw_vers(text):
    """`sw_vers` -> {product_name, product_version, build_version} (ProductVersionExtra kept if present)."""
    out = {}
    for line in _lines(text):
        key, sep, value = line.partition(":")
        if not sep:
            _fail("sw_vers", "unexpected line {0!r}".format(line))
        out[_SW_VERS_KEYS.get(key, key)] = value.strip()
    if "product_version" not in out or "build_version" not in out:
        _fail("sw_vers", "no ProductVersion/BuildVersion")
    return out


_SYSCTL_UNKNOWN = re.compile(r"^sysctl: unknown oid '([^']+)'")
_SYSCTL_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def parse_sysctl(text):
    """`sysctl a b` (`name: value` lines) -> {name: value}; an unknown name maps to None.

    The set form `name: old -> new` yields the new value.
    """
    out = {}
    for line in _lines(text):
        unknown = _SYSCTL_UNKNOWN.match(line)
        if unknown:
            out[unknown.group(1)] = None
            continue
        name, sep, value = line.partition(": ")
        if not sep or not _SYSCTL_NAME.match(name):
            _fail("sysctl", "not a 'name: value' line: {0!r}".format(line))
        out[name] = value.split(" -> ")[-1].strip()
    if not out:
        _fail("sysctl", "empty output")
    return out


_BOOTTIME = re.compile(r"^(?:kern\.boottime: )?\{ sec = (\d+), usec = (\d+) \}")


def parse_kern_boottime(text):
    """`sysctl kern.boottime` (or with -n) -> the time the Mac booted, in seconds since the epoch.

    "kern.boottime: { sec = 1232765114, usec = 823118 } Fri Jan 23 18:45:14 2009" (the date after
    the braces is the local time and is not read).
    """
    match = _BOOTTIME.match(text.strip())
    if not match:
        _fail("sysctl kern.boottime", "expected '{{ sec = N, usec = N }}', got {0!r}".format(text.strip()))
    return int(match.group(1))


def parse_sysctl_n(text, names):
    """`sysctl -n <names...>` -> {name: value}, values in the order asked; unknown names -> None.

    With 2>&1 the `unknown oid` errors are interleaved; they name their key, the values do not.
    """
    lines = _lines(text)
    unknown = set(m.group(1) for m in map(_SYSCTL_UNKNOWN.match, lines) if m)
    values = [line.strip() for line in lines if not _SYSCTL_UNKNOWN.match(line)]
    wanted = [name for name in names if name not in unknown]
    if len(values) != len(wanted):
        _fail("sysctl -n", "{0} values for {1} names".format(len(values), len(wanted)))
    out = dict(zip(wanted, values))
    out.update((name, None) for name in names if name in unknown)
    return out


_SIZE_UNITS = {"MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def _size_bytes(command, size):
    number, dummy, unit = size.partition(" ")
    if unit not in _SIZE_UNITS or not number.isdigit():
        _fail(command, "unexpected size {0!r}".format(size))
    return int(number) * _SIZE_UNITS[unit]


def parse_hardware_json(text):
    """`system_profiler SPHardwareDataType -json` -> one dict for this Mac.

    cpu_cores is the total; core_groups the per-kind counts in Apple's order (the number of
    groups varies: "proc 16:12:4" on an M4 Max, "proc 18:6:0:12" on an M5 Max).
    """
    command = "system_profiler SPHardwareDataType -json"
    try:
        item = json.loads(text)["SPHardwareDataType"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        _fail(command, "not SPHardwareDataType JSON")
    procs = item.get("number_processors")
    if isinstance(procs, int):  # virtual machines report a plain count
        cores, groups = procs, []
    elif isinstance(procs, str) and procs.startswith("proc "):
        counts = [int(n) for n in procs[len("proc "):].split(":")]
        cores, groups = counts[0], counts[1:]
    else:
        _fail(command, "unexpected number_processors {0!r}".format(procs))
    return {
        "model_identifier": item["machine_model"],
        "model_name": item.get("machine_name"),
        "chip": item.get("chip_type"),
        "cpu_cores": cores,
        "core_groups": groups,
        "memory_bytes": _size_bytes(command, item["physical_memory"]),
        "serial_number": item.get("serial_number"),
        "platform_uuid": item.get("platform_UUID"),
        "provisioning_udid": item.get("provisioning_UDID"),
        "boot_rom_version": item.get("boot_rom_version"),
        "os_loader_version": item.get("os_loader_version"),
        "activation_lock": item.get("activation_lock_status") == "activation_lock_enabled",
    }


# --- power and names: pmset, scutil --------------------------------------------------------------

_PMSET_NOTE = re.compile(r"\s*\(.*\)$")


def parse_pmset(text):
    """`pmset -g` / `pmset -g custom` -> {section: {setting: value}}.

    Sections are the flush-left headers ("Currently in use", "AC Power", ...). Numeric values
    become ints; a trailing note such as "(sleep prevented by powerd)" is dropped. Keys may
    contain spaces ("Sleep On Power Button"), so the value is the last field.
    """
    sections = {}
    current = None
    for line in _lines(text):
        if not line[0].isspace():
            if not line.endswith(":"):
                _fail("pmset -g", "unexpected header {0!r}".format(line))
            current = sections.setdefault(line[:-1], {})
            continue
        if current is None:
            _fail("pmset -g", "setting before any section header")
        fields = _PMSET_NOTE.sub("", line.strip()).rsplit(None, 1)
        if len(fields) != 2:
            _fail("pmset -g", "unexpected setting {0!r}".format(line))
        key, value = fields
        current[key] = int(value) if value.isdigit() else value
    if not sections:
        _fail("pmset -g", "empty output")
    return sections


def parse_scutil_get(text):
    """`scutil --get <Name>` (stdout, or stderr when unset) -> the name, or None when "not set"."""
    lines = _lines(text)
    if len(lines) != 1:
        _fail("scutil --get", "expected one line, got {0}".format(len(lines)))
    return None if lines[0].endswith(": not set") else lines[0].strip()


# --- networksetup ---------------------------------------------------------------------------------

_SERVICE_TITLE = re.compile(r"^\((\d+|\*)\) (.+)$")
_SERVICE_PORT = re.compile(r"^\(Hardware Port: (.*), Device: (.*)\)$")


def parse_network_service_order(text):
    """`networksetup -listnetworkserviceorder` -> [{name, order, enabled, hardware_port, device}].

    order is the 1-based priority, None for a disabled "(*)" service; device is None for
    services without one (VPNs).
    """
    services = []
    for line in _lines(text):
        title = _SERVICE_TITLE.match(line)
        port = _SERVICE_PORT.match(line)
        if port and services and "hardware_port" not in services[-1]:
            services[-1].update(hardware_port=port.group(1), device=port.group(2) or None)
        elif title:
            enabled = title.group(1) != "*"
            services.append({"name": title.group(2), "enabled": enabled,
                             "order": int(title.group(1)) if enabled else None})
        elif not line.startswith("An asterisk (*)"):
            _fail("networksetup -listnetworkserviceorder", "unexpected line {0!r}".format(line))
    if not services or any("hardware_port" not in s for s in services):
        _fail("networksetup -listnetworkserviceorder", "no complete service entries")
    return services


def parse_hardware_ports(text):
    """`networksetup -listallhardwareports` -> [{hardware_port, device[, ethernet_address]}] in order.

    ethernet_address is present only when the output has that line ("N/A" becomes None).
    """
    ports = []
    for line in _lines(text):
        key, sep, value = line.partition(": ")
        if key == "Hardware Port":
            ports.append({"hardware_port": value})
        elif key == "Device" and ports:
            ports[-1]["device"] = value
        elif key == "Ethernet Address" and ports:
            ports[-1]["ethernet_address"] = None if value == "N/A" else value
        elif line.startswith("VLAN Configurations"):
            break
        elif not line.startswith("==="):
            _fail("networksetup -listallhardwareports", "unexpected line {0!r}".format(line))
    if not ports or any("device" not in p for p in ports):
        _fail("networksetup -listallhardwareports", "no complete port entries")
    return ports


_THUNDERBOLT_PORT = re.compile(r"^Thunderbolt (\d+)$")


def is_thunderbolt_port(hardware_port):
    """True for a hardware port named "Thunderbolt N" (the Thunderbolt Bridge is not a port)."""
    return bool(_THUNDERBOLT_PORT.match(hardware_port))


def thunderbolt_interfaces(ports):
    """{N: "enX"} for hardware ports named "Thunderbolt N" (the bridge is not a port)."""
    found = {}
    for port in ports:
        match = _THUNDERBOLT_PORT.match(port["hardware_port"])
        if match:
            found[int(match.group(1))] = port["device"]
    return found


_GETINFO_LABEL = re.compile(r"^[A-Z][A-Za-z0-9 -]*$")  # "IP address", "Wi-Fi ID", "IPv6 Router"


def parse_network_service_info(text):
    """`networksetup -getinfo <service>` -> {configuration, ip_address, subnet_mask, router, ...}.

    configuration is the method of the "<method> Configuration" first line ("DHCP", "Manual"), or
    None when there is no such line: a service whose IPv4 is off prints none, as far as public
    sources tell (no capture of one was found), so no wording is assumed for it. The other keys are
    the labels in snake_case; "none", "(null)" and empty values become None.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    info = {"configuration": None}
    if lines and lines[0].endswith(" Configuration") and ":" not in lines[0]:
        info["configuration"] = lines.pop(0)[:-len(" Configuration")]
    if not lines and info["configuration"] is None:
        _fail("networksetup -getinfo", "empty output")
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep or not _GETINFO_LABEL.match(key):
            _fail("networksetup -getinfo", "unexpected line {0!r}".format(line))
        info[key.lower().replace(" ", "_")] = _none_if_unset(value.strip())
    return info


_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_NO_ROUTES = re.compile(r"^There are no additional IPv4 routes on .+\.$")


def parse_additional_routes(text):
    """`networksetup -getadditionalroutes <service>` -> [[destination, subnet_mask, gateway], ...].

    One route a line, "dest mask gateway"; a service without routes prints the sentence
    "There are no additional IPv4 routes on <service>." (both in tests/fixtures/macos).
    """
    routes = []
    for line in _lines(text):
        fields = line.split()
        if len(fields) == 3 and all(_IPV4.match(f) for f in fields):
            routes.append(fields)
        elif not _NO_ROUTES.match(line):
            _fail("networksetup -getadditionalroutes", "unexpected line {0!r}".format(line))
    return routes


# --- interfaces and routes: ifconfig, route -------------------------------------------------------

_IFCONFIG_HEADER = re.compile(r"^([a-z][a-z0-9]*): flags=[0-9a-f]+<([^>]*)> mtu (\d+)")


def _prefix_from_hex_mask(mask):
    return bin(int(mask, 16)).count("1")


def parse_ifconfig(text):
    """`ifconfig [name]` -> {name: {flags, mtu, ether, inet, inet6, members, status}}.

    inet is [{address, prefixlen, broadcast}] with the hex netmask turned into a prefix length;
    members lists a bridge's member interfaces; absent fields are None/empty. Apple's "..."
    elisions (TN3205) are skipped.
    """
    interfaces = {}
    current = None
    for line in _lines(text):
        header = _IFCONFIG_HEADER.match(line)
        if header:
            current = interfaces[header.group(1)] = {
                "flags": header.group(2).split(",") if header.group(2) else [],
                "mtu": int(header.group(3)), "ether": None, "inet": [], "inet6": [],
                "members": [], "status": None}
            continue
        if current is None:
            if line.strip() == "...":
                continue
            _fail("ifconfig", "no interface header before {0!r}".format(line))
        fields = line.split()
        if fields[0] == "ether":
            current["ether"] = fields[1]
        elif fields[0] == "inet":
            attrs = dict(zip(fields[2::2], fields[3::2]))
            current["inet"].append({"address": fields[1],
                                    "prefixlen": _prefix_from_hex_mask(attrs["netmask"]),
                                    "broadcast": attrs.get("broadcast")})
        elif fields[0] == "inet6":
            current["inet6"].append(fields[1])
        elif fields[0] == "member:":
            current["members"].append(fields[1])
        elif fields[0] == "status:":
            current["status"] = fields[1]
    if not interfaces:
        _fail("ifconfig", "no interface found")
    return interfaces


def _unscoped(address):
    return address.split("%", 1)[0].lower()


def interface_of_address(interfaces, address):
    """The interface of parsed `ifconfig` output that holds address (IPv4 or IPv6), else None."""
    wanted = _unscoped(address)
    for name, interface in sorted(interfaces.items()):
        if wanted in [a["address"] for a in interface["inet"]] + [_unscoped(a) for a in interface["inet6"]]:
            return name
    return None


def parse_ssh_connection(value):
    """The `SSH_CONNECTION` variable sshd sets in a session -> {client, client_port, server, server_port}.

    "client_ip client_port server_ip server_port" (sshd(8), ENVIRONMENT): server is this Mac's
    address the connection arrived on.
    """
    fields = (value or "").split()
    if len(fields) != 4 or not fields[1].isdigit() or not fields[3].isdigit():
        _fail("SSH_CONNECTION", "expected 'client_ip client_port server_ip server_port', got {0!r}".format(value))
    return {"client": fields[0], "client_port": int(fields[1]), "server": fields[2], "server_port": int(fields[3])}


def parse_route_get(text):
    """`route -n get <dest>` -> {route_to, destination, mask, gateway, interface, flags}."""
    route = {}
    for line in _lines(text):
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("route to", "destination", "mask", "gateway", "interface",
                                   "flags", "if address"):
            route[key.strip().replace(" ", "_")] = value.strip()
    if "interface" not in route:
        _fail("route -n get", "no 'interface:' line")
    route["flags"] = route.get("flags", "<>").strip("<>").split(",")
    return route


_LAUNCHCTL_FIELD = re.compile(r"^\t([A-Za-z][\w ]*) = (.*)$")


def parse_launchctl_print(text):
    """`launchctl print <domain>/<label>` -> None when the job is not loaded, else its top-level
    `key = value` fields (state, pid, program, ...) as strings.

    Apple documents this output as not an API, so only the one-tab-indented scalar fields are read.
    """
    if "Could not find service" in text:
        return None
    lines = _lines(text)
    if not lines or not lines[0].rstrip().endswith("= {"):
        _fail("launchctl print", "no '<target> = {' header")
    return dict(m.groups() for m in map(_LAUNCHCTL_FIELD.match, lines[1:]) if m)


# --- Thunderbolt and RDMA -------------------------------------------------------------------------

_SPEED = re.compile(r"^(Up to )?(\d+(?:\.\d+)?) Gb/s$")


def _thunderbolt_speed(value):
    match = _SPEED.match(value or "")
    if not match:
        _fail("system_profiler SPThunderboltDataType -json", "unexpected speed {0!r}".format(value))
    number = float(match.group(2))
    return (int(number) if number.is_integer() else number), bool(match.group(1))


def _attached(items, depth, peers, devices):
    # A Mac at the other end of a cable shows up with its own port's domain UUID; drives and
    # docks have none. A Mac found behind a dock is not a direct cable, so it cannot do RDMA.
    for item in items:
        if "domain_uuid_key" in item:
            peers.append({"domain_uuid": item["domain_uuid_key"], "model": item.get("device_name_key"),
                          "name": item.get("_name"), "direct": depth == 1})
        else:
            devices.append({"name": item.get("_name"), "vendor": item.get("vendor_name_key"),
                            "depth": depth})
        _attached(item.get("_items", []), depth + 1, peers, devices)


def parse_thunderbolt_json(text):
    """`system_profiler SPThunderboltDataType -json` -> ports sorted by receptacle number.

    Each port: {receptacle, bus, domain_uuid, speed_gbps, speed_is_max, connected, peers,
    devices}. speed_is_max is True for the idle "Up to N Gb/s" rating (no link). peers are Macs
    ({domain_uuid (the peer port's), model, name, direct}); devices are everything else.
    """
    command = "system_profiler SPThunderboltDataType -json"
    try:
        buses = json.loads(text)["SPThunderboltDataType"]
    except (ValueError, KeyError, TypeError):
        _fail(command, "not SPThunderboltDataType JSON")
    ports = []
    for bus in buses:
        receptacle = bus.get("receptacle_1_tag")
        if not receptacle:
            _fail(command, "bus {0!r} has no receptacle".format(bus.get("_name")))
        speed, is_max = _thunderbolt_speed(receptacle.get("current_speed_key"))
        peers, devices = [], []
        _attached(bus.get("_items", []), 1, peers, devices)
        ports.append({
            "receptacle": int(receptacle["receptacle_id_key"]),
            "bus": bus["_name"],
            "domain_uuid": bus["domain_uuid_key"],
            "speed_gbps": speed,
            "speed_is_max": is_max,
            "connected": receptacle.get("receptacle_status_key") == "receptacle_connected",
            "peers": peers,
            "devices": devices,
        })
    return sorted(ports, key=lambda port: port["receptacle"])


def parse_ibv_devices(text):
    """`ibv_devices` -> [{device, node_guid}]; an empty list when RDMA is disabled.

    Columns are separated by tabs or by spaces depending on the source, so split on whitespace.
    """
    lines = _lines(text)
    if len(lines) < 2 or lines[0].split() != ["device", "node", "GUID"]:
        _fail("ibv_devices", "no 'device node GUID' header")
    devices = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2:
            _fail("ibv_devices", "unexpected line {0!r}".format(line))
        devices.append({"device": fields[0], "node_guid": fields[1]})
    return devices


def parse_ibv_devinfo(text):
    """`ibv_devinfo` -> {device: {transport, ports: {port_number: state}}}, state like "PORT_ACTIVE".

    Tolerates the "..." lines Apple uses to elide fields in TN3205.
    """
    devices = {}
    device = port = None
    for line in _lines(text):
        key, sep, value = line.strip().partition(":")
        value = value.strip()
        if key == "hca_id":
            device = devices[value] = {"transport": None, "ports": {}}
            port = None
        elif device is None:
            if line.strip() != "...":
                _fail("ibv_devinfo", "no hca_id before {0!r}".format(line))
        elif key == "transport":
            device["transport"] = value.split(" (")[0]
        elif key == "port":
            port = int(value)
        elif key == "state" and port is not None:
            device["ports"][port] = value.split(" (")[0]
    if not devices:
        _fail("ibv_devinfo", "no hca_id found")
    return devices


def parse_rdma_ctl_status(text):
    """`rdma_ctl status` -> True for "enabled", False for "disabled"."""
    value = text.strip()
    if value not in ("enabled", "disabled"):
        _fail("rdma_ctl status", "expected 'enabled' or 'disabled', got {0!r}".format(value))
    return value == "enabled"


_FILEVAULT = {"FileVault is On.": True, "FileVault is Off.": False}


def parse_fdesetup_status(text):
    """`fdesetup status` -> True when FileVault is on. The first line decides; later lines (the progress of an
    encryption) are not read."""
    lines = _lines(text)
    if not lines or lines[0].strip() not in _FILEVAULT:
        _fail("fdesetup status", "expected 'FileVault is On.' or 'FileVault is Off.', got {0!r}".format(text.strip()))
    return _FILEVAULT[lines[0].strip()]
