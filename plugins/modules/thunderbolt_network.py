#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: thunderbolt_network
short_description: Give a Mac's cabled Thunderbolt ports persistent point-to-point IPv4 through networksetup
description:
  - Configures the Mac's network services (configd preferences, through C(networksetup)), so the
    configuration survives a reboot; it never uses C(ifconfig) or C(route) alone.
  - A listed port whose service already has its configuration but whose interface holds other IPv4
    addresses (set with C(ifconfig) by hand or by C(mlx.distributed_config --auto-setup), which macOS keeps
    until a reboot) is put back to its service's address with C(ifconfig), so the running Mac has what its
    next boot gives it (RV(ifconfig_commands)).
  - With I(state=present) the Thunderbolt Bridge service is disabled (which also takes C(bridge0)
    down), and for every listed port a network service for its hardware port exists (created as
    C(networksetup -createnetworkservice "Thunderbolt N" "Thunderbolt N") when missing), is enabled,
    and has the manual IPv4 address and mask given, without a router. Ports not listed, and their
    services, are left alone, unless I(exclusive).
  - The route to the peer is the connected subnet route macOS installs from the service's address
    and mask (the peer must be inside that subnet, a /30 or /31 per cable); no additional route is
    set. An additional route on a managed service that covers the peer would steer it away from the
    cable, so it is removed; other additional routes are kept.
  - Everything is read first (C(networksetup -listallhardwareports), C(-listnetworkserviceorder),
    and C(-getinfo) and C(-getadditionalroutes) of each service concerned); only what differs is
    written.
  - What the module changes is recorded in I(record) (written only when something changes); it lists the
    services it created, the previous configuration of services that existed before, and the
    Thunderbolt Bridge's previous state. I(state=absent) uses it to put the network back as it
    was, then deletes it.
  - Writing needs root (C(become=true)); reading does not.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  ports:
    description:
      - The cabled Thunderbolt ports of this Mac and their addresses (one entry per cable end,
        from the fabric plan).
      - With I(state=absent), limits the restore to these ports' services (all recorded services
        when empty).
    type: list
    elements: dict
    default: []
    suboptions:
      device:
        description: The port's BSD interface (C(en2)), as C(networksetup -listallhardwareports) shows it.
        type: str
        required: true
      hardware_port:
        description: The port's hardware port name (C(Thunderbolt 2)); the service gets this name.
        type: str
        required: true
      address:
        description: This end's IPv4 address.
        type: str
        required: true
      prefix:
        description: The cable network's prefix length.
        type: int
        default: 30
      peer:
        description: The other end's IPv4 address; it must be inside I(address)/I(prefix).
        type: str
        required: true
  bridge:
    description:
      - The Thunderbolt Bridge service with I(state=present); C(unchanged) leaves it alone.
      - With I(state=absent) the bridge is put back as recorded, and left as it is when nothing was
        recorded (the module never changed it); C(enabled) turns it on, C(unchanged) leaves it.
    type: str
    choices: [disabled, enabled, unchanged]
    default: disabled
  state:
    description: C(present) configures the ports; C(absent) puts back what the module changed.
    type: str
    choices: [present, absent]
    default: present
  record:
    description: Where the module records what it changed, for I(state=absent).
    type: path
    default: /Library/Application Support/mlx-fleet/thunderbolt-network.json
  read_ports:
    description:
      - Also read the Thunderbolt ports as M(mlx_fleet.cluster.thunderbolt_facts) does and return the fact
        C(mlx_fleet_thunderbolt), read again after the changes (a cable moved while the ports were configured
        shows there), in the same call.
    type: bool
    default: false
  exclusive:
    description:
      - With I(state=present), the listed ports are all of this Mac's fabric; the services the module configured
        (those in I(record)) for ports not listed are put back as I(state=absent) does for them (a service it
        created removed, an earlier one configured as it was), so a cable moved to another port leaves no address
        behind. Services the module never changed are left alone.
    type: bool
    default: false
  services_last:
    description:
      - With I(state=present), the Thunderbolt services (the ports' and the Thunderbolt Bridge's) are put after
        all other services in the service order (C(networksetup -ordernetworkservices), the others keeping
        their order), so macOS never prefers one for the default route or DNS over Ethernet or Wi-Fi.
      - I(state=absent) leaves the order as it is.
    type: bool
    default: true
  hostfile_dir:
    description:
      - Also return RV(hostfiles), the sha256 of the hostfiles (and of the hold beside them) in this folder,
        so the caller writes them only on the Macs whose copies differ (the M(mlx_fleet.cluster.fabric) role does).
    type: path
notes:
  - Supports check mode (nothing is written, the record included; RV(commands) lists what would
    run) and diff mode (before and after per service).
  - macOS applies a service's configuration while it is enabled and after every boot.
requirements:
  - macOS with C(networksetup) on the PATH
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Address both ends of a cable studio-1:2 -- studio-2:2 (on studio-1)
  mlx_fleet.cluster.thunderbolt_network:
    ports:
      - {device: en3, hardware_port: Thunderbolt 2, address: 192.168.77.1, peer: 192.168.77.2}
  become: true

- name: Put the node's network back as it was
  mlx_fleet.cluster.thunderbolt_network:
    state: absent
  become: true
"""

RETURN = r"""
commands:
  description: The networksetup calls that were (or in check mode would be) run, in order, each
    as a list of arguments after C(networksetup).
  returned: always
  type: list
  elements: list
  sample: [["-setnetworkserviceenabled", "Thunderbolt Bridge", "off"],
           ["-createnetworkservice", "Thunderbolt 2", "Thunderbolt 2"]]
services:
  description: Per service concerned, its state after the run (as it is or would be).
  returned: always
  type: list
  elements: dict
  sample: [{"service": "Thunderbolt 2", "hardware_port": "Thunderbolt 2", "device": "en3",
            "created": true, "enabled": true, "ipv4": {"method": "Manual", "address": "192.168.77.1",
            "mask": "255.255.255.252", "router": null}, "routes": []}]
bridge:
  description: The Thunderbolt Bridge service (null when this Mac has none) and whether it is enabled
    after the run.
  returned: always
  type: dict
  sample: {"service": "Thunderbolt Bridge", "enabled": false}
ifconfig_commands:
  description: The ifconfig calls that put a port's live IPv4 addresses back to its service's (run, or in
    check mode would be), each as a list of arguments after C(ifconfig), in order.
  returned: always
  type: list
  elements: list
  sample: [["en2", "inet", "192.168.0.1", "-alias"], ["en2", "inet", "192.168.77.1", "netmask", "255.255.255.252"]]
record:
  description: The record file's path.
  returned: always
  type: str
hostfiles:
  description:
    - Per hostfile name, the sha256 of the file in O(hostfile_dir) on the Mac, null when absent; with them
      C(hostfile.held), the mark of an unfinished macOS update (M(mlx_fleet.cluster.hostfiles)' O(mlx_fleet.cluster.hostfiles#module:held)).
  returned: when O(hostfile_dir) is given
  type: dict
  sample: {"hostfile.json": "6742ef4107e0c1d6...", "hostfile-ring.json": null, "hostfile.held": null}
ansible_facts:
  description: The Thunderbolt ports after the run.
  returned: when O(read_ports=true)
  type: dict
  contains:
    mlx_fleet_thunderbolt:
      description: As M(mlx_fleet.cluster.thunderbolt_facts) returns it (docs/fabric.md).
      type: dict
      returned: when O(read_ports=true)
"""

import os
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services as services_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    output_of, parse_or_fail, run_reads)
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE_FOLDER, digests
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import write_json


def save_record(module, path, record):
    """Atomically replace the record (removed when it holds nothing)."""
    if not services_utils.is_empty(record):
        write_json(module, path, record)
    elif os.path.exists(path):
        try:
            os.unlink(path)
        except OSError as exc:
            module.fail_json(msg="{0}: cannot remove the record ({1}); writing needs root (become: true)".format(
                path, to_native(exc)))


ARGUMENT_SPEC = dict(
    ports=dict(type="list", elements="dict", default=[], options=dict(
        device=dict(type="str", required=True),
        hardware_port=dict(type="str", required=True),
        address=dict(type="str", required=True),
        prefix=dict(type="int", default=30),
        peer=dict(type="str", required=True),
    )),
    bridge=dict(type="str", default="disabled", choices=["disabled", "enabled", "unchanged"]),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    record=dict(type="path", default=services_utils.RECORD),
    read_ports=dict(type="bool", default=False),
    hostfile_dir=dict(type="path"),
    exclusive=dict(type="bool", default=False),
    services_last=dict(type="bool", default=True),
)


# --- the run: read, plan (present or absent), apply ------------------------------------------------

def read_record(module, path):
    try:
        return services_utils.load_record(path)
    except services_utils.RecordError as exc:
        module.fail_json(msg=to_native(exc))


def read_mac(module):
    """The first round of reads: the hardware ports, the services in order, the record; with them the live
    addresses state=present puts back (plan_live) and the ports' own reads (with nothing to change, they are
    the state after)."""
    params = module.params
    module.get_bin_path("networksetup", required=True)  # a Mac without it fails before anything is read
    port_reads = node_facts.THUNDERBOLT_READS if params["read_ports"] else ()
    live_read = ("ifconfig",) if params["state"] == "present" else ()
    reads = run_reads(module, ("hardware_ports", "service_order") + live_read + port_reads)
    return {"reads": reads,
            "hardware_ports": parse_or_fail(module, parsers.parse_hardware_ports,
                                            output_of(module, reads, "hardware_ports")),
            "services": parse_or_fail(module, parsers.parse_network_service_order,
                                      output_of(module, reads, "service_order")),
            "record": read_record(module, params["record"])}


def present(module, mac):
    """The plan of state=present, once the services it compares are read."""
    params = module.params
    ports = services_utils.check_ports(params["ports"], mac["hardware_ports"])  # before anything else is read
    configs = services_utils.read_configs(module, mac["services"], services_utils.configs_to_read(
        ports, params["exclusive"], mac["services"], mac["record"]))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, mac["reads"], "ifconfig"))
    return services_utils.plan_state(params, dict(mac, configs=configs, interfaces=interfaces))


def absent(module, mac):
    """The plan of state=absent: the recorded services (of the listed ports) and the bridge put back."""
    params, record = module.params, mac["record"]
    configs = services_utils.read_configs(module, mac["services"],
                                          sorted(record["previous"]) + sorted(record["created"]))
    commands, new_record, results, bridge, diffs = services_utils.plan_absent(
        params["ports"], params["bridge"], mac["services"], configs, record)
    # An entry is forgotten only after its service was put back.
    return {"commands": commands, "live_steps": [], "results": results, "bridge": bridge, "diffs": diffs,
            "record_first": record, "record": new_record}


STATES = {"present": present, "absent": absent}


def report(module, plan):
    """The module's result from the plan (what is, or in check mode would be, after the run)."""
    for warning in (r.get("warning") for r in plan["results"]):
        if warning:
            module.warn(warning)
    result = dict(changed=bool(plan["commands"] or plan["live_steps"]), commands=plan["commands"],
                  ifconfig_commands=plan["live_steps"], services=plan["results"], bridge=plan["bridge"],
                  record=module.params["record"])
    if module.params["hostfile_dir"]:
        result["hostfiles"] = digests(module, module.params["hostfile_dir"], HOSTFILE_FOLDER)
    if module._diff:
        result["diff"] = plan["diffs"]
    return result


def _write(module, tool, args, result):
    rc, out, err = module.run_command([module.get_bin_path(tool, required=True)] + list(args),
                                      environ_update={"LC_ALL": "C"})
    if rc != 0:
        hint = "; writing needs root (become: true)" if tool == "networksetup" and "admin privileges" in (
            err or out) else ""
        module.fail_json(msg="{0} {1} failed (exit {2}): {3}{4}".format(
            tool, " ".join(shlex.quote(a) for a in args), rc, (err or out).strip(), hint), **result)


def apply(module, plan, record, result):
    """The one write path: the record, the networksetup calls, the ifconfig calls, the record again."""
    if plan["record_first"] != record:
        save_record(module, module.params["record"], plan["record_first"])
    for args in plan["commands"]:
        _write(module, "networksetup", args, result)
    for args in plan["live_steps"]:
        _write(module, "ifconfig", args, result)
    if plan["record"] != plan["record_first"]:
        save_record(module, module.params["record"], plan["record"])


def ports_fact(module, reads):
    """ansible_facts with the Thunderbolt ports (read_ports) from reads, or read again when reads is None."""
    if not module.params["read_ports"]:
        return {}
    if reads is None:
        reads = run_reads(module, node_facts.THUNDERBOLT_READS)
    return {"ansible_facts": {"mlx_fleet_thunderbolt": node_facts.thunderbolt(module, reads)}}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    mac = read_mac(module)
    try:
        plan = STATES[module.params["state"]](module, mac)
    except services_utils.PlanError as exc:
        module.fail_json(msg=to_native(exc))
    result = report(module, plan)
    applies = not module.check_mode and services_utils.writes(plan, mac["record"])
    if applies:
        apply(module, plan, mac["record"], result)
    # After a write the ports are read again: a cable moved while they were configured shows there.
    module.exit_json(**dict(result, **ports_fact(module, None if applies else mac["reads"])))


if __name__ == "__main__":
    main()
