"""ibv_devices(1) from rdma-core as Apple ships it: header, then one line per device
('    %-16s\t%016x', the MLX docs capture with its four-space indent restored). With
RDMA disabled the list is empty and only the header prints."""

from . import rdma
from .state import out


def main(argv: list[str]) -> int:
    text = f"    {'device':<16}\t   node GUID\n    {'------':<16}\t----------------\n"
    for tb in rdma.devices():
        text += f"    {'rdma_' + tb['device']:<16}\t{rdma.guid(tb)}\n"
    out(text)
    return 0
