#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_facts
short_description: Read what mlx-fleet needs to know about a Mac, in one call
description:
  - Reads a Mac through its own command-line tools (C(sw_vers), C(sysctl), C(system_profiler SPHardwareDataType),
    C(networksetup -listallhardwareports), C(ifconfig), C(id), C(sudo -n), C(xcode-select)), never through Linux
    facts, and returns them as the fact C(mlx_fleet_macos).
  - The management interface is the one the Ansible connection arrives on, as the Mac itself sees it (the address
    in the SSH session's C(SSH_CONNECTION), set by sshd, and the C(ifconfig) interface that holds it).
  - Changes nothing on the Mac. Runs as the login user, so it can tell whether that user has sudo.
  - Use M(mlx_fleet.cluster.preflight_check) afterwards to judge the facts against the inventory.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  thunderbolt:
    description:
      - Also read the Thunderbolt ports and the RDMA state, as M(mlx_fleet.cluster.thunderbolt_facts) does, and
        return the fact C(mlx_fleet_thunderbolt) too, in the same call.
      - All reads run at once, so this costs about as long as the slowest tool.
    type: bool
    default: false
  hostfile_dir:
    description:
      - Also return the fact C(mlx_fleet_hostfiles), the sha256 of the hostfiles (and of the hold beside them) in
        this folder, as M(mlx_fleet.cluster.thunderbolt_network)'s RV(mlx_fleet.cluster.thunderbolt_network#module:hostfiles)
        does, so the hostfiles are written only on the Macs whose copies differ, with no other call.
    type: path
  node:
    description:
      - The options of M(mlx_fleet.cluster.macos_node) (as a converge passes them); also compare those settings with
        the Mac, with that module's own code, and return the fact C(mlx_fleet_node) (whether any differs), so a
        converge runs M(mlx_fleet.cluster.macos_node) only on a Mac where one does.
    type: dict
  mlx_env:
    description:
      - The options of M(mlx_fleet.cluster.mlx_env_facts); also read the MLX environment as that module does and
        return it as the fact C(mlx_fleet_env), which the mlx_env role then reads instead of asking again.
      - Options that module would refuse leave the fact out, so it runs and says why.
    type: dict
  network:
    description:
      - Also read what M(mlx_fleet.cluster.thunderbolt_network) compares (the services of the Thunderbolt ports, its
        record, the ports' addresses) and return it as the fact C(mlx_fleet_network), so the controller plans each
        Mac's network step with that module's own code and runs it only where something differs.
    type: bool
    default: false
  models:
    description:
      - The declared models' pinned files as M(mlx_fleet.cluster.models_manifest) returns them (its C(manifests),
        C(hf_cache), C(models_dir); other keys ignored); also read what the Mac holds of them, sizes only, as
        M(mlx_fleet.cluster.model_files_facts) does, and return the fact C(mlx_fleet_model_files), so a converge
        says which models a Mac lacks without another call.
    type: dict
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
notes:
  - A tool missing from C(PATH) or printing an unexpected format fails the module with the command's name.
  - Run it without C(become); sudo does not pass C(SSH_CONNECTION) on, and without it the management interface
    is unknown (null, with a warning).
"""

EXAMPLES = r"""
- name: Read the Mac
  mlx_fleet.cluster.macos_facts:

- name: Read the Mac and its Thunderbolt ports in one call (the facts the fabric needs)
  mlx_fleet.cluster.macos_facts:
    thunderbolt: true

- name: Read the Mac, its Thunderbolt ports and its copies of the hostfiles in one call (mlx-fleet hostfile)
  mlx_fleet.cluster.macos_facts:
    thunderbolt: true
    hostfile_dir: /opt/mlx-fleet

- name: Show its chip and macOS build
  ansible.builtin.debug:
    msg: "{{ mlx_fleet_macos.chip }} on macOS {{ mlx_fleet_macos.product_version }} ({{ mlx_fleet_macos.build_version }})"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the Mac.
  returned: success
  type: dict
  contains:
    mlx_fleet_macos:
      description: What the Mac says about itself.
      type: dict
      returned: success
      contains:
        product_version:
          description: macOS version.
          type: str
          returned: success
          sample: "26.2"
        build_version:
          description: macOS build.
          type: str
          returned: success
          sample: 25C56
        model_identifier:
          description: The model identifier (C(hw.model)).
          type: str
          returned: success
          sample: "Mac16,11"
        model_name:
          description: The marketing name.
          type: str
          returned: success
          sample: Mac mini
        chip:
          description: The chip.
          type: str
          returned: success
          sample: Apple M4 Pro
        memory_bytes:
          description: Installed memory in bytes.
          type: int
          returned: success
          sample: 68719476736
        memory_mb:
          description: Installed memory in MiB.
          type: int
          returned: success
          sample: 65536
        serial_number:
          description: The serial number.
          type: str
          returned: success
          sample: H7X2K4QW9Y
        apple_silicon:
          description: Whether the hardware is Apple silicon (C(hw.optional.arm64), true under Rosetta too).
          type: bool
          returned: success
          sample: true
        user:
          description: The login user.
          type: str
          returned: success
          sample: admin
        home:
          description: The login user's home folder.
          type: str
          returned: success
          sample: /Users/admin
        sudo:
          description: C(passwordless), C(password) (an administrator who needs a password) or C(none).
          type: str
          returned: success
          sample: passwordless
        management_interface:
          description:
            - The interface the management (SSH) connection arrives on, as the Mac sees it.
            - Null when the module does not run in an SSH session (for example under C(become)).
          type: str
          returned: success
          sample: en0
        management_hardware_port:
          description:
            - The hardware port of RV(ansible_facts.mlx_fleet_macos.management_interface) as
              C(networksetup -listallhardwareports) names it (C(Ethernet), C(Wi-Fi), C(Thunderbolt 1),
              C(Thunderbolt Bridge)).
            - Null for an interface that is no hardware port (a VPN tunnel) or when the interface is unknown.
          type: str
          returned: success
          sample: Ethernet
        management_address:
          description: This Mac's address of the management connection (from C(SSH_CONNECTION)); null when unknown.
          type: str
          returned: success
          sample: 10.0.1.21
        command_line_tools:
          description: Whether the Xcode Command Line Tools are installed.
          type: bool
          returned: success
          sample: true
        wired_limit_mb:
          description: Current C(iogpu.wired_limit_mb) (0 is macOS's default).
          type: int
          returned: success
          sample: 0
    mlx_fleet_thunderbolt:
      description: With O(thunderbolt), the Mac's Thunderbolt ports, as M(mlx_fleet.cluster.thunderbolt_facts) returns them.
      type: dict
      returned: when O(thunderbolt) is true
    mlx_fleet_hostfiles:
      description: With O(hostfile_dir), per file name, the sha256 of the file there, null when absent.
      type: dict
      returned: when O(hostfile_dir) is given
      sample: {"hostfile.json": "6742ef4107e0c1d6...", "hostfile-ring.json": null, "hostfile.held": null}
    mlx_fleet_node:
      description: With O(node), what M(mlx_fleet.cluster.macos_node) would change (C(changes)) and whether it would
        write anything (C(differs); true too when it would refuse its options or a read).
      type: dict
      returned: when O(node) is given
      sample: {"differs": false, "changes": {"power": {}, "names": {}}}
    mlx_fleet_env:
      description: With O(mlx_env), the environment as M(mlx_fleet.cluster.mlx_env_facts) returns it.
      type: dict
      returned: when O(mlx_env) is given and that module would accept it
    mlx_fleet_network:
      description:
        - With O(network), what M(mlx_fleet.cluster.thunderbolt_network) compares, read as it reads it -
          C(hardware_ports), C(services) (in order), C(configs) (of every Thunderbolt service and every recorded one),
          C(record), C(interfaces) (the Thunderbolt ports' IPv4 addresses).
        - Left out when the record cannot be read (that module says why).
      type: dict
      returned: when O(network) is true
    mlx_fleet_model_files:
      description: With O(models), what the Mac holds of them (sizes checked, no byte hashed), as
        M(mlx_fleet.cluster.model_files_facts) returns it.
      type: dict
      returned: when O(models) is given
"""

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_node_plan as node_plan
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, mlx_env_state
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services as services_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE_FOLDER, digests
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    output_of, parse_or_fail, parse_or_warn, run_reads)

NETWORK_READS = ("hardware_ports", "service_order", "ifconfig")


def validated(spec, options):
    """The options as a module with this argument spec would take them, or None when it would refuse them."""
    if options is None:
        return None
    checked = ArgumentSpecValidator(spec).validate(options)
    return None if checked.error_messages else checked.validated_parameters


def node_settings(module, params, reads):
    """mlx_fleet_node: what macos_node would change, planned with its code from this round's reads."""
    if params is None or node_plan.params_problem(params):
        return {"differs": True, "changes": {}}
    try:
        plan = node_plan.plan(module, params, reads)
    except ValueError:
        return {"differs": True, "changes": {}}
    return {"differs": any(p["writes"] for p in plan), "changes": node_plan.report(module, plan)["changes"]}


def network_state(module, reads):
    """mlx_fleet_network: what thunderbolt_network compares, before the fabric says which ports it configures;
    None when its record cannot be read (the module then runs and says why)."""
    try:
        record = services_utils.load_record(services_utils.RECORD)
    except services_utils.RecordError:
        return None
    hardware_ports = parse_or_warn(module, parsers.parse_hardware_ports, output_of(module, reads, "hardware_ports"))
    services = parse_or_fail(module, parsers.parse_network_service_order, output_of(module, reads, "service_order"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, reads, "ifconfig"))
    devices = parsers.thunderbolt_interfaces(hardware_ports).values()
    interfaces = dict((d, {"inet": interfaces[d].get("inet", [])}) for d in devices if d in interfaces)
    configs = services_utils.read_configs(module, services,
                                          services_utils.configs_to_read_ahead(services, record, interfaces))
    return {"hardware_ports": hardware_ports, "services": services, "configs": configs, "record": record,
            "interfaces": interfaces}


def main():
    module = AnsibleModule(argument_spec={"thunderbolt": {"type": "bool", "default": False},
                                          "hostfile_dir": {"type": "path"}, "node": {"type": "dict"},
                                          "mlx_env": {"type": "dict"}, "network": {"type": "bool", "default": False},
                                          "models": {"type": "dict"}},
                           supports_check_mode=True)
    params = module.params
    node = validated(node_plan.ARGUMENT_SPEC, params["node"])
    env = validated(mlx_env_state.ARGUMENT_SPEC, params["mlx_env"])
    env = None if env is None or mlx_env_state.problem(env) else env
    # The network's first reads (quick ones) name the services to read: those reads then run beside all the
    # others, and the environment's probes beside them too, so the slowest read sets the time.
    first = run_reads(module, NETWORK_READS) if params["network"] else {}
    with ThreadPoolExecutor(max_workers=2) as beside:
        env_state = beside.submit(mlx_env_state.read, module, env) if env else None
        network = beside.submit(network_state, module, first) if first else None
        facts, reads = node_facts.gather(module, with_thunderbolt=params["thunderbolt"], done=first,
                                         extra_reads=node_plan.needed_reads(node) if node else ())
        if params["hostfile_dir"]:
            facts["mlx_fleet_hostfiles"] = digests(module, params["hostfile_dir"], HOSTFILE_FOLDER)
        if params["node"] is not None:
            facts["mlx_fleet_node"] = node_settings(module, node, reads)
        if network is not None and network.result() is not None:
            facts["mlx_fleet_network"] = network.result()
        if env_state is not None:
            facts["mlx_fleet_env"] = env_state.result()
        if params["models"] is not None:
            models = params["models"]
            facts["mlx_fleet_model_files"] = model_files.read_models(
                models.get("manifests") or [], models.get("hf_cache") or defaults.MODELS_HF_CACHE,
                models.get("models_dir") or defaults.MODELS_DIR, False)
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
