"""ibv_devinfo(1): rdma-core's layout (tabs) with Apple's 'Thunderbolt (100)' transport,
as in TN3205's capture (which renders each tab as four spaces and elides fields).

With -v, each port's verbose lines and its GID table as rdma-core prints them ("GID[%3d]:\t\t%s, RoCE v2",
libibverbs/examples/devinfo.c): the interface's link-local IPv6 first, then one IPv4-mapped GID per IPv4
address the interface has (a Thunderbolt RDMA port publishes one only while its interface has an IPv4
address: ml-explore/mlx#4191)."""

import time

from . import ifconfig, net, rdma, state
from .state import Fail, err, out


VERBOSE_PORT = (
    "\t\t\tmax_msg_sz:\t\t0x80000000\n"
    "\t\t\tport_cap_flags:\t\t0x00010000\n"
    "\t\t\tport_cap_flags2:\t0x0000\n"
    "\t\t\tmax_vl_num:\t\t1 (1)\n"
    "\t\t\tbad_pkey_cntr:\t\t0x0\n"
    "\t\t\tqkey_viol_cntr:\t\t0x0\n"
    "\t\t\tsm_sl:\t\t\t0\n"
    "\t\t\tpkey_tbl_len:\t\t1\n"
    "\t\t\tgid_tbl_len:\t\t16\n"
    "\t\t\tsubnet_timeout:\t\t0\n"
    "\t\t\tinit_type_reply:\t0\n"
)


def gids(tb: dict, links: list[dict]) -> list[str]:
    """The port's GID table: its interface's link-local IPv6, then ::ffff: and each IPv4 it has."""
    entry = next((e for e in links if ifconfig.mac_name(e["ifname"]) == tb["device"]), None)
    if entry is None:
        return []
    local = [a["local"] for a in entry.get("addr_info", []) if a["family"] == "inet6" and a.get("scope") == "link"]
    return local + [f"::ffff:{a['local']}" for a in net.ipv4(entry)]


def describe(tb: dict, links: list[dict] | None = None) -> str:
    """One device; with links (the interfaces, as for -v) its verbose port lines and GID table."""
    g = rdma.guid(tb)
    guid = ":".join(g[i : i + 4] for i in range(0, 16, 4))
    state_text = "PORT_ACTIVE (4)" if rdma.port_active(tb) else "PORT_DOWN (1)"
    return (
        f"hca_id:\trdma_{tb['device']}\n"
        "\ttransport:\t\t\tThunderbolt (100)\n"
        "\tfw_ver:\t\t\t\t0.0.0\n"
        f"\tnode_guid:\t\t\t{guid}\n"
        f"\tsys_image_guid:\t\t\t{guid}\n"
        "\tvendor_id:\t\t\t0x05ac\n"
        "\tvendor_part_id:\t\t\t0\n"
        "\thw_ver:\t\t\t\t0x0\n"
        "\tphys_port_cnt:\t\t\t1\n"
        "\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\t{state_text}\n"
        "\t\t\tmax_mtu:\t\t4096 (5)\n"
        "\t\t\tactive_mtu:\t\t4096 (5)\n"
        "\t\t\tsm_lid:\t\t\t0\n"
        "\t\t\tport_lid:\t\t0\n"
        "\t\t\tport_lmc:\t\t0x00\n"
        "\t\t\tlink_layer:\t\tEthernet\n"
        + (VERBOSE_PORT + "".join(f"\t\t\tGID[{i:3d}]:\t\t{g}, RoCE v2\n" for i, g in enumerate(gids(tb, links)))
           if links is not None else "")
        + "\n"
    )


def main(argv: list[str]) -> int:
    if state.node().get("rdma_wedged"):  # a wedged RDMA stack: the query never returns
        time.sleep(24 * 3600)
    devices = rdma.devices()
    verbose = bool(argv) and argv[0] in ("-v", "--verbose")
    argv = argv[1:] if verbose else argv
    if argv[:1] in (["-d"], ["--ib-dev"]) and len(argv) == 2:
        devices = [tb for tb in devices if f"rdma_{tb['device']}" == argv[1]]
        if not devices:
            raise Fail(f"IB device '{argv[1]}' wasn't found\n", 255)
    elif argv:
        raise Fail("Usage: ibv_devinfo [-v] [-d device]\n", 1)
    if not devices:
        err("No IB devices found\n")
        return 0
    links = net.links() if verbose else None
    out("".join(describe(tb, links) for tb in devices))
    return 0
