#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_state
short_description: Read everything mlx-fleet manages on a Mac, in one call, for the audit and the run record
description:
  - Reads the Mac through its own tools, every command of C(READS) in plugins/module_utils/macos_commands.py
    (C(sw_vers), C(sysctl), C(system_profiler), C(networksetup), C(ifconfig), C(route), C(pmset), C(scutil),
    C(launchctl print), C(ibv_devices), C(ibv_devinfo), C(rdma_ctl status), ...), and the files mlx-fleet puts on
    it, and returns them as facts. Changes nothing.
  - Sets C(mlx_fleet_macos) and C(mlx_fleet_thunderbolt) exactly as M(mlx_fleet.cluster.macos_facts) and
    M(mlx_fleet.cluster.thunderbolt_facts) do, and C(mlx_fleet_node) with the node settings, the environment
    and the hostfiles (see RETURN).
  - The environment's Python (O(env_path)/bin/python) lists its distributions and checks every installed file
    against the sha256 its distribution's C(RECORD) gives for it; a file edited after the install is named.
  - Needs no root, so it runs without C(become); every read works as the login user, C(launchctl print
    system/LABEL) included.
  - The controller side is the C(mlx_fleet.cluster.node_state) action plugin, which chooses the paths from the
    inventory and the roles' defaults, and M(mlx_fleet.cluster.audit), which compares the Macs.
version_added: "0.2.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  env_path:
    description:
      - The MLX environment (venv) the mlx_env role installs.
      - Default C(mlx_env_path) as the inventory or the mlx_env role's defaults give it (the action plugin fills it in).
    type: path
  hostfile_dir:
    description:
      - Where the mlx_fabric role puts the hostfiles on every Mac.
      - Default C(mlx_fabric_hostfile_dir) as the inventory or the role's defaults give it.
    type: path
  hostfiles:
    description: The hostfile names to hash in O(hostfile_dir).
    type: list
    elements: str
    default: [hostfile.json, hostfile-ring.json]
  wired_limit_label:
    description:
      - The label of the wired-limit LaunchDaemon.
      - Default C(macos_node_wired_limit_label) as the inventory or the macos_node role's defaults give it.
    type: str
  verify_files:
    description: Check every installed file of the environment against its C(RECORD) hash.
    type: bool
    default: true
  models:
    description:
      - The declared models' pinned manifests, as C(mlx_fleet.cluster.models_manifest) returns them; their files
        are read as M(mlx_fleet.cluster.model_files_facts) reads them, in this same call.
      - Empty (the default) reads no model and sets no C(mlx_fleet_model_files).
    type: list
    elements: dict
    default: []
  models_deep:
    description: Hash every byte of every model file, not only compare sizes.
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
  - mlx_fleet.cluster.options.models
"""

EXAMPLES = r"""
- name: Read the whole Mac
  mlx_fleet.cluster.node_state:
    env_path: /opt/mlx-fleet/venv
    hostfile_dir: /opt/mlx-fleet
"""

RETURN = r"""
ansible_facts:
  description: What the Mac says about itself.
  returned: success
  type: dict
  contains:
    mlx_fleet_macos:
      description: As M(mlx_fleet.cluster.macos_facts) returns it.
      type: dict
      returned: success
    mlx_fleet_thunderbolt:
      description: As M(mlx_fleet.cluster.thunderbolt_facts) returns it.
      type: dict
      returned: success
    mlx_fleet_node:
      description: The node settings, the environment and the hostfiles.
      type: dict
      returned: success
      contains:
        pmset:
          description: C(pmset -g custom), per power source.
          type: dict
          sample: {"AC Power": {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1}}
        names:
          description: C(ComputerName) and C(LocalHostName) from C(scutil --get); null when not set.
          type: dict
        addresses:
          description: Per Thunderbolt device, its IPv4 addresses as C(address/prefix) (C(ifconfig)).
          type: dict
          sample: {"en2": ["192.168.184.165/30"], "en4": []}
        wired_limit:
          description: C(now_mb) (C(sysctl iogpu.wired_limit_mb)); C(daemon) with C(path), C(present),
            C(value_mb) (from its C(ProgramArguments)), C(loaded) and C(state) (C(launchctl print system/LABEL)).
          type: dict
        environment:
          description: C(path), C(exists) (its Python runs), C(python) (version, executable, prefix, home,
            sys_platform, machine, environment markers),
            C(installed) (name to version), C(records) (per distribution C(files_sha256), C(checked),
            C(modified), C(missing) with their counts), C(error).
          type: dict
        hostfiles:
          description: Per hostfile name, the sha256 of the file on the Mac, null when absent, C(unreadable) when this user cannot read it.
          type: dict
        automatic_macos_updates:
          description: C(AutomaticallyInstallMacOSUpdates) (C(defaults read)); null when not set, C(unknown) when
            its output is in no known wording.
          type: raw
        services:
          description: The network services in their order (C(networksetup -listnetworkserviceorder)).
          type: list
          elements: dict
        default_route:
          description: The interface of the default route (C(route -n get default)), null when there is none.
          type: str
        filevault:
          description: Whether FileVault is on (C(fdesetup status)); null when it says something else.
          type: bool
        competing:
          description: The launchd labels of loaded programs that reconfigure the Thunderbolt ports
            (C(launchctl print system/io.exo.networksetup)).
          type: list
          elements: str
    mlx_fleet_model_files:
      description: With O(models), what the Mac holds of them, as M(mlx_fleet.cluster.model_files_facts) returns it.
      type: dict
      returned: when O(models) is not empty
"""

import os
import plistlib
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, files, macos_settings, node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    AUTO_INSTALL_MACOS, COMPETING_DAEMON_READS, WIRED_LIMIT_LABEL, output_of, parse_or_fail, run_reads)
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import pyvenv_home, run_probe

NODE_READS = ("pmset", "computer_name", "local_host_name", "wired_limit_daemon", "auto_install_macos", "default_route",
              "filevault") + tuple(COMPETING_DAEMON_READS)
NAME_READS = (("ComputerName", "computer_name"), ("LocalHostName", "local_host_name"))
_WIRED_LIMIT_ARG = re.compile(r"^iogpu\.wired_limit_mb=(\d+)$")


def _names(module, results):
    names = {}
    for key, read in NAME_READS:
        try:
            names[key] = macos_settings.scutil_value(key, *results[read])
        except ValueError as exc:
            module.fail_json(msg=str(exc))
    return names


def _addresses(thunderbolt):
    return dict((port["device"], port["addresses"]) for port in thunderbolt["ports"] if port.get("device"))


def _daemon(module, results, label):
    """The LaunchDaemon's plist (what it sets at boot) and whether launchd has it loaded."""
    path = "/Library/LaunchDaemons/{0}.plist".format(label)
    daemon = {"path": path, "present": os.path.exists(path), "value_mb": None, "loaded": False, "state": None}
    if daemon["present"]:
        try:
            with open(path, "rb") as handle:
                plist = plistlib.load(handle)
        except (IOError, OSError, plistlib.InvalidFileException, ValueError) as exc:
            daemon["error"] = "unreadable: {0}".format(exc)
        else:
            matches = [_WIRED_LIMIT_ARG.match(str(arg)) for arg in plist.get("ProgramArguments") or []]
            values = [int(m.group(1)) for m in matches if m]
            daemon["value_mb"] = values[0] if values else None
    job = _job(module, results, "wired_limit_daemon")
    daemon.update(loaded=job is not None, state=(job or {}).get("state"))
    return daemon


def _automatic_updates(module, results):
    return macos_settings.defaults_bool(module.warn, AUTO_INSTALL_MACOS, *results["auto_install_macos"])


def _job(module, results, name):
    """A `launchctl print system/LABEL` read: the job's fields, None when launchd has it not loaded."""
    rc, out, err = results[name]
    if rc != 0 and "Could not find service" not in out + err:  # not loaded: exit 113 and that line
        module.fail_json(msg="launchctl print failed (exit {0}): {1}".format(rc, (err or out).strip()))
    return parse_or_fail(module, parsers.parse_launchctl_print, out + err if rc else out)


def _default_route(module, results):
    """The interface of the default route, None when there is none (route -n get prints no interface)."""
    rc, out, err = results["default_route"]
    try:
        return parsers.parse_route_get(out)["interface"] if rc == 0 else None
    except ValueError:
        return None


def _filevault(module, results):
    """Whether FileVault is on; None (with a warning quoting it) when fdesetup says something else."""
    rc, out, err = results["filevault"]
    try:
        return parsers.parse_fdesetup_status(out) if rc == 0 else None
    except ValueError as exc:
        module.warn("FileVault state unknown: {0}".format(exc))
        return None


def _environment(module, path, verify):
    env = {"path": path, "exists": False, "python": None, "installed": {}, "records": {}, "error": ""}
    python = os.path.join(path, "bin", "python")
    if not os.access(python, os.X_OK):
        return env
    info, env["error"] = run_probe(module, python, "installed", *(["verify"] if verify else []))
    if info:
        env.update(exists=True, installed=info["installed"], records=info.get("records", {}), python={
            "version": ".".join(str(v) for v in info["version"]), "executable": info["executable"],
            "prefix": info["prefix"], "home": pyvenv_home(path), "sys_platform": info["sys_platform"],
            "machine": info["machine"], "markers": info["markers"]})
    return env


ARGUMENT_SPEC = dict(
    env_path=dict(type="path"),
    hostfile_dir=dict(type="path"),
    hostfiles=dict(type="list", elements="str", default=["hostfile.json", "hostfile-ring.json"]),
    wired_limit_label=dict(type="str"),
    verify_files=dict(type="bool", default=True),
    models=dict(type="list", elements="dict", default=[]),
    models_deep=dict(type="bool", default=False),
    hf_cache=dict(type="path", default=defaults.MODELS_HF_CACHE),
    models_dir=dict(type="path", default=defaults.MODELS_DIR),
)


def checked_label(module):
    """The wired limit daemon's launchd label, once the arguments the action plugin gives are there."""
    for name in ("env_path", "hostfile_dir"):
        if not module.params[name]:
            module.fail_json(msg="node_state: {0} is missing (the node_state action plugin gives it)".format(name))
    label = module.params["wired_limit_label"] or WIRED_LIMIT_LABEL
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", label):
        module.fail_json(msg="wired_limit_label {0!r} is not a launchd label".format(label))
    return label


def read_node(module, label):
    """One round of every read the three facts need."""
    names = []
    for group in (node_facts.MACOS_READS, node_facts.THUNDERBOLT_READS, NODE_READS):
        names += [name for name in group if name not in names]
    return run_reads(module, names, {"wired_limit_daemon": ("launchctl", "print", "system/" + label)})


def node_fact(module, results, macos, thunderbolt, label):
    """mlx_fleet_node: what the roles converge, as the node has it."""
    params = module.params
    pmset = parse_or_fail(module, parsers.parse_pmset, output_of(module, results, "pmset"))
    hostfiles = files.digests(module, params["hostfile_dir"], [os.path.basename(name) for name in params["hostfiles"]])
    return {
        "pmset": pmset,
        "names": _names(module, results),
        "addresses": _addresses(thunderbolt),
        "wired_limit": {"now_mb": macos["wired_limit_mb"], "daemon": _daemon(module, results, label)},
        "environment": _environment(module, params["env_path"], params["verify_files"]),
        "hostfiles": hostfiles,
        "automatic_macos_updates": _automatic_updates(module, results),
        "services": parse_or_fail(module, parsers.parse_network_service_order, output_of(module, results, "service_order")),
        "default_route": _default_route(module, results),
        "filevault": _filevault(module, results),
        "competing": sorted(label for name, label in COMPETING_DAEMON_READS.items()
                            if _job(module, results, name) is not None),
    }


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    label = checked_label(module)
    results = read_node(module, label)
    macos = node_facts.macos(module, results)
    thunderbolt = node_facts.thunderbolt(module, results)
    facts = {"mlx_fleet_macos": macos, "mlx_fleet_thunderbolt": thunderbolt,
             "mlx_fleet_node": node_fact(module, results, macos, thunderbolt, label)}
    params = module.params
    if params["models"]:
        facts["mlx_fleet_model_files"] = model_files.read_models(params["models"], params["hf_cache"],
                                                                 params["models_dir"], params["models_deep"])
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
