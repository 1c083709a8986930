# -*- coding: utf-8 -*-
"""Parsers for the macOS command outputs the toolkit reads.

Pure standard library, Python 3.9 compatible: this runs on the Mac's /usr/bin/python3.
Every parser takes the command's text output and returns plain dicts/lists; when the text is
not that command's format it raises ValueError naming the command, so a changed or failed
command is reported instead of being read as "nothing there". The line-by-line parsers take a
``warnings`` list: given one, a single line of unknown wording is left out and quoted there instead
(the Mac's other facts still count); without it, such a line refuses the whole output.
Formats are pinned by the real captures in tests/fixtures/macos.
"""

from __future__ import absolute_import, division, print_function

import json
import re

__metaclass__ = type


def _fail(command, why):
    raise ValueError("{0}: {1}".format(command, why))


def _unrecognised(command, line, warnings):
    """A line of a wording never seen on a Mac: with a warnings list it is left out and quoted there
    (the rest of the output still counts), else the whole output is refused."""
    if warnings is None:
        _fail(command, "unexpected line {0!r}".format(line))
    warnings.append("{0}: left out a line of unknown wording: {1!r}".format(command, line))


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


# A tool's own log line, printed (on stderr) before its output: "2022-12-04 10:42:37.043 softwareupdate[48281:139852780]
# Package Authoring Error: ...", "2015-08-20 11:44:23.212 defaults[1593:98737] " (tests/fixtures/macos/*-log-line__*).
_LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} (?P<tool>[\w.-]+)\[\d+:\d+\](?: |$)")


def _tool_log_line(line, tool):
    match = _LOG_LINE.match(line.strip())
    return bool(match) and match.group("tool") == tool


def _without_tool_log(text, tool):
    """The text without the tool's log line headers (what follows a header on its line is kept)."""
    return "\n".join(_LOG_LINE.sub("", line.strip(), count=1) if _tool_log_line(line, tool) else line
                     for line in text.splitlines()).strip()


def _none_if_unset(value):
    # networksetup prints "none" or "(null)" for fields it has no value for.
    return None if value in ("", "none", "(null)") else value


# --- identity: sw_vers, sysctl, system_profiler SPHardwareDataType -----------------------------

_SW_VERS_KEYS = {"ProductName": "product_name", "ProductVersion": "product_version",
                 "BuildVersion": "build_version"}


def parse_sw_vers(text, warnings=None):
    """`sw_vers` -> {product_name, product_version, build_version} (ProductVersionExtra kept if present)."""
    out = {}
    for line in _lines(text):
        key, sep, value = line.partition(":")
        if not sep:
            _unrecognised("sw_vers", line, warnings)
            continue
        out[_SW_VERS_KEYS.get(key, key)] = value.strip()
    if "product_version" not in out or "build_version" not in out:
        _fail("sw_vers", "no ProductVersion/BuildVersion")
    return out


_SYSCTL_UNKNOWN = re.compile(r"^sysctl: unknown oid '([^']+)'")
_SYSCTL_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def parse_sysctl(text, warnings=None):
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
            _unrecognised("sysctl", line, warnings)
            continue
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


_DIGITS = re.compile(r"^[0-9]+$")  # str.isdigit() also takes "²", which int() refuses
_SIZE_UNITS = {"MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_SIZE = re.compile(r"^([0-9]+) (MB|GB|TB)$")
_PROCS = re.compile(r"^proc [0-9]+(?::[0-9]+)*$")


def _shown(value):
    """A value quoted for a message, cut short: odd input can be long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _size_bytes(command, size):
    match = _SIZE.match(size) if isinstance(size, str) else None
    if not match:
        _fail(command, "unexpected size {0}".format(_shown(size)))
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


def parse_hardware_json(text):
    """`system_profiler SPHardwareDataType -json` -> one dict for this Mac.

    cpu_cores is the total; core_groups the per-kind counts in Apple's order (the number of
    groups varies: "proc 16:12:4" on an M4 Max, "proc 18:6:0:12" on an M5 Max). The optional
    text fields are None when absent or not text.
    """
    command = "system_profiler SPHardwareDataType -json"
    try:
        item = json.loads(text)["SPHardwareDataType"][0]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        _fail(command, "not SPHardwareDataType JSON")
    if not isinstance(item, dict):
        _fail(command, "the first item is not an object: {0}".format(_shown(item)))

    def text_of(key):
        value = item.get(key)
        return value if isinstance(value, str) else None

    procs = item.get("number_processors")
    if isinstance(procs, int) and not isinstance(procs, bool) and procs > 0:  # virtual machines: a plain count
        cores, groups = procs, []
    elif isinstance(procs, str) and _PROCS.match(procs):
        counts = [int(n) for n in procs[len("proc "):].split(":")]
        cores, groups = counts[0], counts[1:]
    else:
        _fail(command, "unexpected number_processors {0}".format(_shown(procs)))
    if not text_of("machine_model"):
        _fail(command, "no machine_model")
    return {
        "model_identifier": item["machine_model"],
        "model_name": text_of("machine_name"),
        "chip": text_of("chip_type"),
        "cpu_cores": cores,
        "core_groups": groups,
        "memory_bytes": _size_bytes(command, item.get("physical_memory")),
        "serial_number": text_of("serial_number"),
        "platform_uuid": text_of("platform_UUID"),
        "provisioning_udid": text_of("provisioning_UDID"),
        "boot_rom_version": text_of("boot_rom_version"),
        "os_loader_version": text_of("os_loader_version"),
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
        current[key] = int(value) if _DIGITS.match(value) else value
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


def parse_network_service_order(text, warnings=None):
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
            _unrecognised("networksetup -listnetworkserviceorder", line, warnings)
    if not services or any("hardware_port" not in s for s in services):
        _fail("networksetup -listnetworkserviceorder", "no complete service entries")
    return services


def parse_hardware_ports(text, warnings=None):
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
            _unrecognised("networksetup -listallhardwareports", line, warnings)
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


def parse_network_service_info(text, warnings=None):
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
            _unrecognised("networksetup -getinfo", line, warnings)
            continue
        info[key.lower().replace(" ", "_")] = _none_if_unset(value.strip())
    return info


_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_NO_ROUTES = re.compile(r"^There are no additional IPv4 routes on .+\.$")


def parse_additional_routes(text, warnings=None):
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
            _unrecognised("networksetup -getadditionalroutes", line, warnings)
    return routes


# --- interfaces and routes: ifconfig, route -------------------------------------------------------

_IFCONFIG_HEADER = re.compile(r"^([a-z][a-z0-9]*): flags=[0-9a-f]+<([^>]*)> mtu (\d+)")


_HEX_MASK = re.compile(r"^0x[0-9a-f]{8}$")


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
        if fields[0] in ("ether", "inet", "inet6", "member:", "status:") and len(fields) < 2:
            _fail("ifconfig", "{0} without a value: {1!r}".format(fields[0], line))
        if fields[0] == "ether":
            current["ether"] = fields[1]
        elif fields[0] == "inet":
            attrs = dict(zip(fields[2::2], fields[3::2]))
            if not _HEX_MASK.match(attrs.get("netmask", "")):
                _fail("ifconfig", "inet line without a hex netmask: {0!r}".format(line))
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
    if len(fields) != 4 or not _DIGITS.match(fields[1]) or not _DIGITS.match(fields[3]):
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

_SPEED = re.compile(r"^(Up to )?([0-9]+(?:\.[0-9]+)?) Gb/s$")
_TB_COMMAND = "system_profiler SPThunderboltDataType -json"


def _thunderbolt_speed(value):
    match = _SPEED.match(value) if isinstance(value, str) else None
    if not match:
        _fail(_TB_COMMAND, "unexpected speed {0}".format(_shown(value)))
    number = float(match.group(2))
    return (int(number) if number.is_integer() else number), bool(match.group(1))


def _items(value, where):
    """The `_items` list of an entry: a list of objects, else the output is not one system_profiler writes."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        _fail(_TB_COMMAND, "{0}: _items is not a list of objects".format(where))
    return value


def _attached(items, peers, devices):
    # A Mac at the other end of a cable shows up with its own port's domain UUID; drives and
    # docks have none. A Mac found behind a dock is not a direct cable, so it cannot do RDMA.
    # Walked with a list rather than recursion: a chain of docks is as deep as the output says.
    pending = [(item, 1) for item in reversed(items)]  # a stack: depth first, in the output's order
    while pending:
        item, depth = pending.pop()
        if "domain_uuid_key" in item:
            peers.append({"domain_uuid": item["domain_uuid_key"], "model": item.get("device_name_key"),
                          "name": item.get("_name"), "direct": depth == 1})
        else:
            devices.append({"name": item.get("_name"), "vendor": item.get("vendor_name_key"),
                            "depth": depth})
        pending += [(child, depth + 1) for child in reversed(_items(item.get("_items"), _shown(item.get("_name"))))]


def parse_thunderbolt_json(text):
    """`system_profiler SPThunderboltDataType -json` -> ports sorted by receptacle number.

    Each port: {receptacle, bus, domain_uuid, speed_gbps, speed_is_max, connected, peers,
    devices}. speed_is_max is True for the idle "Up to N Gb/s" rating (no link). peers are Macs
    ({domain_uuid (the peer port's), model, name, direct}); devices are everything else.
    """
    command = _TB_COMMAND
    try:
        buses = json.loads(text)["SPThunderboltDataType"]
    except (ValueError, KeyError, TypeError, RecursionError):
        _fail(command, "not SPThunderboltDataType JSON")
    ports = []
    for bus in _items(buses, "SPThunderboltDataType"):
        receptacle = bus.get("receptacle_1_tag")
        if not receptacle:
            _fail(command, "bus {0} has no receptacle".format(_shown(bus.get("_name"))))
        if not isinstance(receptacle, dict) or not _DIGITS.match(str(receptacle.get("receptacle_id_key"))) \
                or not isinstance(bus.get("_name"), str) or not isinstance(bus.get("domain_uuid_key"), str):
            _fail(command, "bus {0}: no receptacle number, bus name or domain UUID".format(_shown(bus.get("_name"))))
        speed, is_max = _thunderbolt_speed(receptacle.get("current_speed_key"))
        peers, devices = [], []
        _attached(_items(bus.get("_items"), bus["_name"]), peers, devices)
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


def parse_ibv_devices(text, warnings=None):
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
            _unrecognised("ibv_devices", line, warnings)
            continue
        devices.append({"device": fields[0], "node_guid": fields[1]})
    return devices


def rdma_devices_named(text):
    """The `rdma_*` device names anywhere in a text: what MLX itself looks for in `ibv_devices`, read from an
    output whose wording parse_ibv_devices does not know."""
    return sorted(set(re.findall(r"\brdma_\w+", text or "")))


# rdma-core's ibv_devinfo -v prints each port's GID table as "GID[%3d]:\t\t%s" and, for a RoCE GID, ", RoCE v2"
# (or v1) after it (libibverbs/examples/devinfo.c; linux-rdma/rdma-core#682).
_GID = re.compile(r"^GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)(?:,\s*(.+))?$")


def parse_ibv_devinfo(text):
    """`ibv_devinfo [-v]` -> {device: {transport, ports: {port_number: state}, gids: {port_number: [gid]}}},
    state like "PORT_ACTIVE", gid like "::ffff:192.168.1.2". ``gids`` holds only the ports whose verbose
    listing (-v: its gid_tbl_len line) was seen, so an output without -v says nothing about GIDs.

    Tolerates the "..." lines Apple uses to elide fields in TN3205.
    """
    devices = {}
    device = port = None
    for line in _lines(text):
        key, sep, value = line.strip().partition(":")
        value = value.strip()
        gid = _GID.match(line.strip())
        if key == "hca_id":
            device = devices[value] = {"transport": None, "ports": {}, "gids": {}}
            port = None
        elif gid and device is not None and port is not None:
            device["gids"].setdefault(port, []).append(gid.group(2).lower())
        elif key == "gid_tbl_len" and device is not None and port is not None:
            device["gids"].setdefault(port, [])
        elif device is None:
            if line.strip() != "...":
                _fail("ibv_devinfo", "no hca_id before {0!r}".format(line))
        elif key == "transport":
            device["transport"] = value.split(" (")[0]
        elif key == "port":
            if not _DIGITS.match(value):
                _fail("ibv_devinfo", "unexpected port line {0!r}".format(line))
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


# --- softwareupdate --list ----------------------------------------------------------------------

# Wordings seen on real Macs (tests/fixtures/macos/softwareupdate-*): the tool's header lines (on a
# terminal), the list's heading, and the one line of "nothing pending" (stderr, exit status 1).
_SU_HEADERS = ("Software Update Tool", "Finding available software",
               "Software Update found the following new or updated software:")
SU_NOTHING = "No new software available."
_SU_LABEL = re.compile(r"^\s*\* Label: (?P<label>.+?)\s*$")
_SU_TITLE_KEYS = re.compile(r", (Version|Size|Recommended|Action): ")
# A macOS build: 25F84, 20C5061b (a beta ends in a letter), 25D771280a (a Background Security Improvement or
# Rapid Security Response: six digits and a letter, as sw_vers prints it, tests/fixtures/macos/sw_vers-security-*).
_SU_BUILD = re.compile(r"^(?P<name>.+)-(?P<build>\d{2}[A-Z]\d{1,6}[a-z]?)$")


def _su_size_kib(value):
    match = re.match(r"^(\d+)(KiB|K)$", value or "")
    return int(match.group(1)) if match else None


def parse_softwareupdate_list(text):
    """`softwareupdate --list` (stdout and stderr together) -> {updates, warnings}.

    Each update: label, title, version, build (from a macOS label `macOS <Name> <version>-<build>`,
    else None), size_kib, recommended, action, macos (a macOS update, not Safari or the Command Line
    Tools). "No new software available." is an empty list; the tool's own log lines are left out. A line in
    no wording seen on a real Mac is quoted in warnings and skipped, never a failure.
    """
    updates, warnings = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped in _SU_HEADERS or stripped == SU_NOTHING \
                or _tool_log_line(stripped, "softwareupdate"):
            continue
        label = _SU_LABEL.match(line)
        if label:
            name = label.group("label")
            build = _SU_BUILD.match(name)
            updates.append({"label": name, "title": None, "version": None,
                            "build": build.group("build") if build and name.startswith("macOS ") else None,
                            "size_kib": None, "recommended": None, "action": None,
                            "macos": name.startswith("macOS ")})
            continue
        if stripped.startswith("Title: ") and updates and updates[-1]["title"] is None:
            parts = _SU_TITLE_KEYS.split(stripped[len("Title: "):].rstrip().rstrip(","))
            fields = dict(zip(parts[1::2], parts[2::2]))
            update = updates[-1]
            update.update(title=parts[0], version=fields.get("Version"), size_kib=_su_size_kib(fields.get("Size")),
                          recommended=None if "Recommended" not in fields else fields["Recommended"] == "YES",
                          action=fields.get("Action"))
            update["macos"] = update["macos"] and parts[0].startswith("macOS ")
            continue
        warnings.append("softwareupdate --list: unknown line {0!r}".format(stripped))
    return {"updates": updates, "warnings": warnings}


# `softwareupdate --install`: "Downloading <title>" / "Downloaded: <title>" (seen on a real Mac,
# tests/fixtures/macos/softwareupdate-install__*), then the preparation and "Restarting..." with --restart.
_SU_STARTED = re.compile(r"^(Downloading |Downloaded: |Restarting)")
_SU_ERRORS = ("failed to authorize", "Error", "error", "not found", "No such update")


def parse_softwareupdate_install(text):
    """`softwareupdate --install LABEL ...` output so far -> {started, error, last}.

    started: a line says the download or the preparation began; error: the first line reporting a
    failure (as the tool words it), else None; last: the last non-empty line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    started = any(_SU_STARTED.match(line) for line in lines)
    error = next((line for line in lines if any(word in line for word in _SU_ERRORS)), None)
    return {"started": started, "error": error, "last": lines[-1] if lines else ""}


# --- defaults read DOMAIN KEY --------------------------------------------------------------------

_DEFAULTS_MISSING = re.compile(r"The domain/default pair of \(.*\) does not exist")


def parse_defaults_bool(text):
    """`defaults read DOMAIN KEY` (stdout and stderr together) of a boolean -> True, False, or None when the
    key is not set ("The domain/default pair of (...) does not exist"), either possibly after the tool's log
    line. Anything else raises ValueError quoting it."""
    value = _without_tool_log(text, "defaults")
    if value in ("0", "1"):
        return value == "1"
    if _DEFAULTS_MISSING.fullmatch(value.rstrip(".")):
        return None
    _fail("defaults read", "expected 0, 1 or 'does not exist', got {0!r}".format(value[:200]))


_FILEVAULT = {"FileVault is On.": True, "FileVault is Off.": False}


def parse_fdesetup_status(text):
    """`fdesetup status` -> True when FileVault is on. The first line decides; later lines (the progress of an
    encryption) are not read."""
    lines = _lines(text)
    if not lines or lines[0].strip() not in _FILEVAULT:
        _fail("fdesetup status", "expected 'FileVault is On.' or 'FileVault is Off.', got {0!r}".format(text.strip()))
    return _FILEVAULT[lines[0].strip()]


# --- processes: ps -axo pid,ppid,etime,rss,command ------------------------------------------------------------

# macOS ps (BSD) names etime's column ELAPSED; rss is in KiB (ps(1) "rss: resident set size, in Kilobytes").
PS_HEADER = ["PID", "PPID", "ELAPSED", "RSS", "COMMAND"]
_ETIME = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)$")


def parse_etime(value):
    """ps's etime, [[dd-]hh:]mm:ss -> seconds; ValueError otherwise."""
    match = _ETIME.match(value)
    if not match:
        _fail("ps", "elapsed time {0!r} is not [[dd-]hh:]mm:ss".format(value))
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_ps(text, warnings=None):
    """`ps -axo pid,ppid,etime,rss,command` -> [{pid, ppid, age_seconds, rss_kib, command}], in its order."""
    lines = _lines(text)
    if not lines or lines[0].split() != PS_HEADER:
        _fail("ps", "no '{0}' header".format(" ".join(PS_HEADER)))
    found = []
    for line in lines[1:]:
        fields = line.split(None, 4)
        try:
            if len(fields) < 5 or not (fields[0].isdigit() and fields[1].isdigit() and fields[3].isdigit()):
                raise ValueError(line)
            age = parse_etime(fields[2])
        except ValueError:
            _unrecognised("ps", line, warnings)
            continue
        found.append({"pid": int(fields[0]), "ppid": int(fields[1]), "age_seconds": age, "rss_kib": int(fields[3]),
                      "command": fields[4]})
    return found
