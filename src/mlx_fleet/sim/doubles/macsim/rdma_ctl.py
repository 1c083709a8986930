"""rdma_ctl: status prints enabled/disabled; enable/disable only work in Recovery, where
they set the NVRAM variable the next boot applies. Outside Recovery it refuses as a real
Mac does, root or not: 'This tool needs to be executed from Recovery OS.' (exit 77, as a
public cluster guide records it; the same refusal csrutil gives)."""

from . import rdma, state
from .state import Fail, out


def main(argv: list[str]) -> int:
    if argv == ["status"]:
        wording = state.node().get("rdma_ctl_status_output")  # `sim set NODE rdma_ctl_status_output=...`
        out(wording + "\n" if wording else "enabled\n" if rdma.enabled() else "disabled\n")
        return 0
    if argv not in (["enable"], ["disable"]):
        raise Fail("usage: rdma_ctl enable|disable|status\n", 64)
    node = state.node()
    if not node.get("in_recovery"):
        raise Fail("rdma_ctl: This tool needs to be executed from Recovery OS.\n", 77)
    if not state.is_root():
        raise Fail("rdma_ctl: Operation not permitted\n", 1)
    node["nvram_rdma"] = argv[0] == "enable"
    state.write_json(state.node_path(), node)
    return 0
