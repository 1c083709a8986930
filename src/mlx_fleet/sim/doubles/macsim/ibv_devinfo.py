"""ibv_devinfo(1): rdma-core's layout (tabs) with Apple's 'Thunderbolt (100)' transport,
as in TN3205's capture (which renders each tab as four spaces and elides fields)."""

import time

from . import rdma, state
from .state import Fail, err, out


def describe(tb: dict) -> str:
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
        "\n"
    )


def main(argv: list[str]) -> int:
    if state.node().get("rdma_wedged"):  # a wedged RDMA stack: the query never returns
        time.sleep(24 * 3600)
    devices = rdma.devices()
    if argv[:1] in (["-d"], ["--ib-dev"]) and len(argv) == 2:
        devices = [tb for tb in devices if f"rdma_{tb['device']}" == argv[1]]
        if not devices:
            raise Fail(f"IB device '{argv[1]}' wasn't found\n", 255)
    elif argv:
        raise Fail("Usage: ibv_devinfo [-d device]\n", 1)
    if not devices:
        err("No IB devices found\n")
        return 0
    out("".join(describe(tb) for tb in devices))
    return 0
