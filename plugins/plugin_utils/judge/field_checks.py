"""Checks users' reports show are missing (docs/troubleshooting.md), one home for the audit and the watch:
MLX_METAL_FAST_SYNCH in the hostfile's environment, a competing network manager on the Thunderbolt ports,
the default route through bridge0 or a Thunderbolt port, the Thunderbolt services ahead of the others
in the service order, each cabled RDMA port's IPv4-mapped GID, and FileVault (a restarted Mac waits at
its unlock screen). Each takes what the Mac's tools said, parsed, and returns what is wrong in words
(empty when nothing is), with the fix beside it. Pure Python.
"""

from __future__ import annotations

import shlex

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import (
    is_thunderbolt_service, thunderbolt_last)

FAST_SYNCH = "MLX_METAL_FAST_SYNCH"
# ml-explore/mlx#3830: with it set a distributed job can leave the GPU wedged until a restart, and MLX's
# documentation now says to leave it unset; exo-explore/exo#1390 shows exo setting it ("Fast synch flag: 1").
FAST_SYNCH_WHY = (f"{FAST_SYNCH} can wedge the GPU until a restart (ml-explore/mlx#3830); MLX's documentation "
                  "now says to leave it unset")
# launchd labels of programs that reconfigure the Thunderbolt ports behind the fabric's back.
COMPETING_DAEMONS = {
    # exo-explore/exo#1330: exo's daemon switches the Thunderbolt services back to DHCP (about every 30 minutes).
    "io.exo.networksetup": "exo's network setup, which resets the Thunderbolt ports to DHCP",
}


def fast_synch(envs: list[str]) -> str:
    """What is wrong with a hostfile's (or mlx_fleet_envs') environment."""
    set_ = [e for e in envs or [] if str(e).split("=", 1)[0] == FAST_SYNCH]
    return f"{', '.join(set_)} in the environment: {FAST_SYNCH_WHY}" if set_ else ""


# {hostfile}: the command that rewrites the hostfiles, in the install's form (plugin_utils.base.fixes.fill).
FAST_SYNCH_FIX = f"remove {FAST_SYNCH} from mlx_fleet_envs, then {{hostfile}}"


def competing(loaded: list[str]) -> str:
    """The competing LaunchDaemons launchd has loaded (labels)."""
    return "; ".join(f"{label} is loaded ({COMPETING_DAEMONS.get(label, 'a network manager')})" for label in loaded or [])


def competing_fix(loaded: list[str]) -> str:
    return "; ".join(f"sudo launchctl bootout system/{label} and remove /Library/LaunchDaemons/{label}.plist (or "
                     "stop that program from managing the Thunderbolt ports)" for label in loaded or [])


def service_order(services: list[dict]) -> str:
    """An enabled Thunderbolt service ordered ahead of an enabled other one (macOS then prefers it)."""
    enabled = [s for s in services or [] if s.get("enabled")]
    ahead = []
    for index, service in enumerate(enabled):
        if is_thunderbolt_service(service):
            later = [s["name"] for s in enabled[index + 1:] if not is_thunderbolt_service(s)]
            if later:
                ahead.append(f"{service['name']} ({service['order']}) comes before {', '.join(later)}")
    return "; ".join(ahead)


def service_order_fix(services: list[dict]) -> str:
    """The networksetup command that puts the Thunderbolt services last, keeping the others' order."""
    return "sudo networksetup -ordernetworkservices " + " ".join(shlex.quote(n) for n in thunderbolt_last(services))


def default_route(interface: str | None, thunderbolt_devices: list[str]) -> str:
    """The default route through the Thunderbolt Bridge or a Thunderbolt port."""
    if interface and (interface == "bridge0" or interface in thunderbolt_devices):
        return (f"the default route goes through {interface}: the Mac's traffic leaves over Thunderbolt instead of "
                "its network port")
    return ""


def filevault(on: bool | None) -> str:
    """FileVault on: after any restart (an update's included) the Mac waits at the unlock screen, off the network."""
    if on:
        return ("FileVault is on: after a restart the Mac waits for a password at the unlock screen, off the "
                "network, until someone types it")
    return ""


def filevault_fix(host: str) -> str:
    return (f"on {host}: sudo fdesetup disable, or restart it only with sudo fdesetup authrestart (and keep someone "
            "near it for updates)")


def rdma_gid(port: dict, addresses: list[str]) -> str:
    """A cabled RDMA port whose GID table (ibv_devinfo -v) holds no IPv4-mapped GID for its IPv4 addresses.

    JACCL picks the GID ::ffff:<IPv4>; a Thunderbolt RDMA port publishes one only while its interface has an
    IPv4 address, and without it the queue pair fails later with "Changing queue pair to RTR failed with
    errno 22" (ml-explore/mlx#3467, #4191). Nothing is said when the GID table was not listed (None).
    """
    gids = port.get("rdma_gids")
    if gids is None or not port.get("rdma_device") or not port.get("connected"):
        return ""
    mapped = [g for g in gids if g.startswith("::ffff:")]
    if mapped and (not addresses or any(f"::ffff:{a.split('/')[0]}" in mapped for a in addresses)):
        return ""
    has = ", ".join(gids) or "an empty GID table"
    wanted = ", ".join(f"::ffff:{a.split('/')[0]}" for a in addresses) or "IPv4-mapped GID (::ffff:<IPv4>)"
    return (f"RDMA port {port['rdma_device']} has no {wanted} in ibv_devinfo -v (it lists {has}): JACCL's queue "
            "pairs fail with 'Changing queue pair to RTR failed with errno 22'")


# {site}: the converge command in the install's form (plugin_utils.base.fixes.fill), as FAST_SYNCH_FIX.
RDMA_GID_FIX = "give the port its IPv4 address back: {site} (ibv_devinfo -v then lists ::ffff:<its address>)"
