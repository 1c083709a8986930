"""ibv_devices(1) from rdma-core as Apple ships it: header, then one line per device
('    %-16s\t%016x', the MLX docs capture with its four-space indent restored). With
RDMA disabled the list is empty and only the header prints."""

from . import rdma, state
from .state import out


def main(argv: list[str]) -> int:
    wording = state.node().get("ibv_devices_output")  # `sim set NODE ibv_devices_output=...`
    if wording:
        out(wording + "\n")
        return 0
    text = f"    {'device':<16}\t   node GUID\n    {'------':<16}\t----------------\n"
    for tb in rdma.devices():
        text += f"    {'rdma_' + tb['device']:<16}\t{rdma.guid(tb)}\n"
    out(text)
    return 0
