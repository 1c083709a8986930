"""Inventory checks made on the controller before any Mac is touched.

Each problem is one line naming the host or variable, what is wrong and the fix, so a
user can correct the inventory without reading a traceback.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections import defaultdict

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import check_local_host_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError, parse_cable, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import field_checks
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS

DEFAULT_IP_POOL = defaults.IP_POOL
# Inventory variables that hold a version: 26.2, 3.12, 0.32.4 (two or three numeric parts).
VERSION_VARS = (
    "mlx_fleet_min_macos", "mlx_env_python_version", "mlx_env_uv_version",
    "mlx_env_mlx_version", "mlx_env_mlx_lm_version",
)
_VERSION_RE = re.compile(r"\d+\.\d+(\.\d+)?")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A launchd label: reverse-DNS, so it is also a safe file name under /Library/LaunchDaemons.
_LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*(\.[A-Za-z0-9][A-Za-z0-9-]*)+")
# Above this share of memory wired for the GPU, macOS itself starts to starve.
MAX_WIRED_FRACTION = 0.9
# Private ranges offered when a pool cannot be used, first one that fits this controller.
SUGGESTED_POOLS = ("192.168.0.0/16", "10.99.0.0/16", "172.31.0.0/16")


def inventory_problem(line: str, variables: tuple[str, ...] = ()) -> Finding:
    """A problem with the inventory: its line, and the variables whose values it is about (an extra variable (-e)
    of one of those names wins over the inventory, and labelled() says so)."""
    return Finding("inventory", found=line, variables=variables)


def _about(variables: tuple[str, ...], lines: list[str]) -> list[Finding]:
    return [inventory_problem(line, variables) for line in lines]


def check_inventory(hosts: dict[str, dict], group_vars: dict, controller_networks=(), *,
                    outside: tuple[str, ...] = (), group: str = defaults.CLUSTER_GROUP) -> list[str]:
    """Problems with the cluster as declared, one line each (inventory_problems)."""
    return [problem.line for problem in inventory_problems(hosts, group_vars, controller_networks, outside=outside,
                                                           group=group)]


def inventory_problems(hosts: dict[str, dict], group_vars: dict, controller_networks=(), *,
                       outside: tuple[str, ...] = (), group: str = defaults.CLUSTER_GROUP) -> list[Finding]:
    """Problems with the cluster as declared, each with the variables it is about.

    ``hosts`` maps each host in the cluster group to its variables (the merged host and
    group variables Ansible gives it); ``group_vars`` are the cluster-wide values, read from
    the first host when the caller has no better source; ``controller_networks`` are this
    controller's own ``(interface, IPv4Interface)`` pairs, which the pool must stay clear of;
    ``outside`` the inventory's other hosts (not in ``group``), named as such when a cable names one.
    """
    if not hosts:
        return [inventory_problem("the group has no hosts; list your Macs under mlx_cluster")]
    problems = _host_name_problems(hosts)
    problems += _about(("ansible_host",), _duplicate_addresses(hosts))
    for name, hv in hosts.items():
        problems += _host_var_problems(name, hv)
    backend = group_vars.get("mlx_fleet_backend", defaults.BACKEND)
    if backend not in BACKENDS:
        problems += _about(("mlx_fleet_backend",),
                           [f"mlx_fleet_backend: unknown backend {backend!r}; use one of {', '.join(BACKENDS)}"])
    for var in VERSION_VARS:
        problems += _about((var,), _version_problems(var, group_vars.get(var)))
    problems += _about(("mlx_fleet_envs",), _env_problems(group_vars.get("mlx_fleet_envs")))
    cables, cable_problems = _cables(hosts, group_vars.get("mlx_fleet_cables") or [], outside, group)
    problems += _about(("mlx_fleet_cables",), cable_problems)
    problems += _pool_problems(hosts, group_vars, cables, controller_networks)
    return problems


def _address(name: str, hv: dict) -> str:
    return str(hv.get("ansible_host") or name).lower().rstrip(".")


def _valid_host_name(name: str) -> bool:
    """Dot-separated labels, each a valid Bonjour name (letters, digits, hyphens)."""
    return len(name) <= 253 and all(check_local_host_name(label) is None for label in name.split("."))


def local_host_name(name: str, hv: dict) -> str:
    """The LocalHostName roles/macos_node gives the host; on a valid host name its default
    (the short name with other characters replaced by hyphens) is the short name itself."""
    return str(hv.get("macos_node_local_host_name") or name.split(".")[0])


def _host_name_problems(hosts: dict[str, dict]) -> list[Finding]:
    problems = []
    by_local_name: dict[str, list[str]] = defaultdict(list)
    for name, hv in hosts.items():
        if not _valid_host_name(name):
            problems.append(inventory_problem(f"{name!r}: not a valid host name; name each Mac with letters, digits "
                                              "and hyphens (dots only between labels), e.g. studio-1"))
            continue
        local = local_host_name(name, hv)
        if check_local_host_name(local) is not None:
            problems.append(inventory_problem(f"{name}: macos_node_local_host_name {local!r} is not a Bonjour name; "
                                              "use letters, digits and hyphens only (at most 63, no hyphen first or "
                                              "last)", ("macos_node_local_host_name",)))
            continue
        by_local_name[local.lower()].append(name)
        reached = str(hv.get("ansible_host") or name).rstrip(".")
        if reached.lower().endswith(".local") and reached[: -len(".local")].lower() != local.lower():
            problems.append(inventory_problem(
                f"{name}: reached as {reached}, but macos_node would rename the Mac to {local}.local and lose it; "
                f"set macos_node_local_host_name: {reached[: -len('.local')]} or ansible_host: {local}.local",
                ("macos_node_local_host_name", "ansible_host")))
    problems += _about(("macos_node_local_host_name",), [
        f"{' and '.join(names)}: the same Bonjour name {local}.local; give each Mac its own macos_node_local_host_name"
        for local, names in by_local_name.items() if len(names) > 1])
    return problems


def _duplicate_addresses(hosts: dict[str, dict]) -> list[str]:
    by_address: dict[str, list[str]] = defaultdict(list)
    for name, hv in hosts.items():
        by_address[_address(name, hv)].append(name)
    return [
        f"{' and '.join(names)}: the same address {address} twice; each Mac needs its own ansible_host"
        for address, names in by_address.items() if len(names) > 1
    ]


def _host_var_problems(name: str, hv: dict) -> list[Finding]:
    problems = []

    def add(variable: str, line: str) -> None:
        problems.append(inventory_problem(line, (variable,)))

    model = hv.get("mlx_fleet_model")
    if model is not None and not isinstance(model, str):
        add("mlx_fleet_model",
            f"{name}: mlx_fleet_model is a {_kind(model)}; give one model key, "
            f"e.g. mlx_fleet_model: {next(iter(MODELS))}")
    elif model is not None and model not in MODELS:
        close = difflib.get_close_matches(model, MODELS, n=3, cutoff=0.6)
        add("mlx_fleet_model",
            f"{name}: unknown model {model!r} in mlx_fleet_model; "
            + (f"did you mean {', '.join(close)}? " if close else "")
            + "Or leave it out: the Mac's own facts are read")
    location = hv.get("mlx_fleet_location")
    if location is not None and not (isinstance(location, str) and location.isprintable()):
        what = "has control characters" if isinstance(location, str) else f"is a {_kind(location)}"
        add("mlx_fleet_location",
            f"{name}: mlx_fleet_location {what}; write where the Mac stands as one line of text "
            "(quoted in YAML), e.g. \"rack 2, shelf 3\"")
    label = hv.get("macos_node_wired_limit_label")
    if label is not None and not (isinstance(label, str) and _LABEL_RE.fullmatch(label)):
        add("macos_node_wired_limit_label",
            f"{name}: macos_node_wired_limit_label {label!r} is not a reverse-DNS launchd label; "
            "use one like org.mlx-fleet.wired-limit (letters, digits, hyphens, dot-separated)")
    fraction = hv.get("macos_node_wired_limit_fraction")
    if fraction is not None:
        value = _number(fraction)
        if value is None or not 0 <= value <= MAX_WIRED_FRACTION:
            add("macos_node_wired_limit_fraction",
                f"{name}: macos_node_wired_limit_fraction {fraction!r} is not a fraction from 0 to "
                f"{MAX_WIRED_FRACTION}; above that macOS runs short of memory: use at most "
                f"{MAX_WIRED_FRACTION} (0 keeps macOS's default)")
    limit = hv.get("macos_node_wired_limit_mb")
    size = _number(limit)
    if limit is not None and (size is None or size < 0 or not size.is_integer()):
        add("macos_node_wired_limit_mb",
            f"{name}: macos_node_wired_limit_mb {limit!r} is not a size in MB; give a whole number "
            "(0 keeps macOS's default)")
    return problems


def _kind(value) -> str:
    for kind, types in (("boolean", bool), ("number", (int, float)), ("list", list), ("mapping", dict)):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _version_problems(var: str, value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, float):
        # YAML reads 26.10 as the number 26.1: the text the user wrote is already lost.
        return [f"{var}: {value!r} is a number in YAML, which reads 26.10 as 26.1; quote the version as you "
                f"mean it, e.g. {var}: \"26.2\""]
    if not isinstance(value, str) or not _VERSION_RE.fullmatch(value):
        return [f"{var}: malformed version {value!r}; write it like 26.2 or 0.32.4 (quoted in YAML)"]
    return []


def _env_problems(envs) -> list[str]:
    if envs is None:
        return []
    fix = "write mlx_fleet_envs as a list of NAME=VALUE strings, e.g. [\"OMP_NUM_THREADS=4\"]"
    if not isinstance(envs, list):
        return [f"mlx_fleet_envs: is a {_kind(envs)}, not a list; {fix}"]
    problems = []
    for entry in envs:
        name, sep, value = entry.partition("=") if isinstance(entry, str) else ("", "", "")
        if not sep or not _ENV_NAME_RE.fullmatch(name):
            problems.append(f"mlx_fleet_envs: {entry!r} is not NAME=VALUE with a NAME of letters, digits and "
                            f"underscores; {fix}")
        elif not value.isprintable():
            problems.append(f"mlx_fleet_envs: {name}'s value has control characters; give it on one line")
        elif field_checks.fast_synch([entry]):  # the converge keeps it out of the hostfiles
            problems.append(f"mlx_fleet_envs: {field_checks.fast_synch([entry])}; remove it")
    return problems


def _cables(hosts: dict[str, dict], cables, outside=(), group: str = defaults.CLUSTER_GROUP) -> tuple[list[str], list[str]]:
    """(the cables that parse, a problem line for each that does not)."""
    if not isinstance(cables, list):
        return [], ["mlx_fleet_cables: must be a list of 'host:port -- host:port'"]
    # A host without a declared model still gets the unknown-host and same-port checks.
    most_ports = max(m.port_count for m in MODELS.values())
    counts = {
        name: MODELS[hv["mlx_fleet_model"]].port_count
        if isinstance(hv.get("mlx_fleet_model"), str) and hv["mlx_fleet_model"] in MODELS else most_ports
        for name, hv in hosts.items()
    }
    problems = []
    checked: list[str] = []
    for cable in cables:
        try:
            ends = parse_cable(cable)
            elsewhere = [end.host for end in (ends.a, ends.b) if end.host not in counts and end.host in outside]
            if elsewhere:
                problems.append(f"mlx_fleet_cables: cable {ends}: {elsewhere[0]} is in the inventory but not in "
                                f"group {group}; list it under {group} or take the cable out of the plan")
                continue
            parse_cables(checked + [cable], counts)
            checked.append(cable)
        except CablePlanError as exc:
            problems.append(f"mlx_fleet_cables: {exc}")
    return checked, problems


def labelled(problems: list[Finding], extra_vars) -> list[str]:
    """Each problem's line headed by where its value comes from: an extra variable (-e) when one of its variables
    was given as one (an extra variable wins over the inventory), else the inventory."""
    return [f"{'extra variable (-e)' if set(problem.variables) & set(extra_vars) else 'inventory'}: {problem.line}"
            for problem in problems]


def _pool_problems(hosts: dict[str, dict], group_vars: dict, cables: list[str],
                   controller_networks) -> list[Finding]:
    management = group_vars.get("mlx_fleet_management_network")
    if management:
        try:
            management_net = ipaddress.ip_network(str(management), strict=False)
        except ValueError:
            return _about(("mlx_fleet_management_network",),
                          [f"mlx_fleet_management_network: {management!r} is not a network like 10.0.1.0/24"])
    return _about(("mlx_fleet_ip_pool",), _pool_lines(hosts, group_vars, cables, controller_networks,
                                                      management_net if management else None))


def _pool_lines(hosts: dict[str, dict], group_vars: dict, cables: list[str], controller_networks,
                management_net) -> list[str]:
    if "mlx_fleet_ip_pool" not in group_vars:
        return []  # the fabric picks a range nothing here uses (choose_pool)
    pool_text = group_vars["mlx_fleet_ip_pool"]
    try:
        pool = ipaddress.ip_network(str(pool_text), strict=False)
    except ValueError:
        return [f"mlx_fleet_ip_pool: {pool_text!r} is not an IPv4 network like 192.168.0.0/16"]
    if pool.version != 4 or pool.prefixlen > 30:
        return [f"mlx_fleet_ip_pool: {pool_text} must be an IPv4 network of at least 4 addresses (/30)"]
    if pool.network_address != ipaddress.ip_interface(str(pool_text)).ip:
        return [f"mlx_fleet_ip_pool: {pool_text} has host bits set; write the network itself, {pool}"]
    unusable = _unusable(pool)
    if unusable:
        return [f"mlx_fleet_ip_pool: {pool} is {unusable}; use a private range the Macs and this controller do "
                f"not use, e.g. {_suggestion(controller_networks)}"]
    problems = []
    slots = pool.num_addresses // 4
    if len(cables) > slots:
        problems.append(f"mlx_fleet_ip_pool: {pool} holds {slots} /30 networks for {len(cables)} planned cables; "
                        f"use a larger pool (at least /{32 - (4 * len(cables) - 1).bit_length()})")
    mine = [f"{address.network} ({interface} {address.ip})" for interface, address in controller_networks
            if address.network.overlaps(pool)]
    if mine:
        problems.append(f"mlx_fleet_ip_pool: {pool} overlaps this controller's network{'s' * (len(mine) > 1)} "
                        f"{', '.join(mine)}; pick a pool neither the controller nor the Macs use, "
                        f"e.g. {_suggestion(controller_networks)}")
    if management_net is not None and management_net.overlaps(pool):
        problems.append(f"mlx_fleet_ip_pool: {pool} overlaps the management network {management_net}; "
                        "pick a pool the Macs do not already use")
    for name, hv in hosts.items():
        try:
            address = ipaddress.ip_address(str(hv.get("ansible_host", "")))
        except ValueError:
            continue  # a name: checked against the real address in preflight
        if address in pool:
            problems.append(overlap_message(name, str(address), str(pool)))
    return problems


def _unusable(pool: ipaddress.IPv4Network) -> str | None:
    """Why cable addresses cannot come from this range, or None."""
    if pool.prefixlen == 0:
        return "every IPv4 address"
    if pool.subnet_of(ipaddress.IPv4Network("0.0.0.0/8")):
        return "in 0.0.0.0/8, which means 'this host', not a network"
    for what, test in (("loopback", pool.is_loopback), ("multicast", pool.is_multicast),
                       ("link-local (169.254/16, macOS's self-assigned addresses)", pool.is_link_local),
                       ("reserved", pool.is_reserved)):
        if test:
            return f"a {what} range"
    if not pool.is_private:
        return "not a private range (its addresses belong to hosts on the Internet)"
    return None


def _first_clear(used: list) -> str | None:
    """The first of SUGGESTED_POOLS that overlaps none of the used networks."""
    return next((text for text in SUGGESTED_POOLS
                 if not any(net.overlaps(ipaddress.IPv4Network(text)) for net in used)), None)


def _suggestion(controller_networks) -> str:
    return _first_clear([address.network for dummy, address in controller_networks]) or \
        "a private /16 no network here uses"


def choose_pool(recorded: str | None, controller_networks, mac_addresses, management_network: str | None = None
                ) -> tuple[str, str | None]:
    """The pool when the inventory sets no mlx_fleet_ip_pool, and a line for the summary when it is chosen now.

    recorded: the pool the cluster model kept (cluster.json), kept while it overlaps no network
    the controller (controller_networks) or the Macs (their management addresses, the declared
    mlx_fleet_management_network) use, so addresses never move because the controller did; else the
    first of SUGGESTED_POOLS clear of them all. ValueError when none is.
    """
    used = [address.network for dummy, address in controller_networks]
    for text in [*mac_addresses, management_network]:
        try:
            used.append(ipaddress.IPv4Network(str(text), strict=False))
        except ValueError:
            continue  # none, or not IPv4
    try:
        kept = ipaddress.IPv4Network(str(recorded)) if recorded else None
    except ValueError:
        kept = None
    if kept is not None and not _unusable(kept) and not any(net.overlaps(kept) for net in used):
        return str(kept), None
    chosen = _first_clear(used)
    if chosen is None:
        raise ValueError(f"mlx_fleet_ip_pool is not set, and {', '.join(SUGGESTED_POOLS)} all overlap networks this "
                         "controller or the Macs use; set mlx_fleet_ip_pool to a private range none of them uses")
    instead = f" instead of {kept}, which overlaps a network in use now" if kept else ""
    return chosen, (f"mlx_fleet_ip_pool is not set: the cables' addresses come from {chosen}, a private range neither "
                    f"this controller nor any Mac uses{instead}; cluster.json keeps it for the next runs")


def overlap_problem(host: str, address: str, pool: str) -> Finding:
    return Finding("pool", (host,), f"management address {address} is inside mlx_fleet_ip_pool {pool}",
                   "a pool the Macs do not use", "pick a pool the Macs do not already use")


def overlap_message(host: str, address: str, pool: str) -> str:
    return overlap_problem(host, address, pool).line
