"""sysctl(8): the hardware and kernel keys cluster tools read, and the writable
iogpu.wired_limit_mb (runtime state: a reboot resets it to 0, as on a Mac)."""

import time

from . import names, state
from .state import Fail, err, out

WRITABLE = {"iogpu.wired_limit_mb": 0, "iogpu.wired_lwm_mb": 0}


def boottime() -> str:
    """As macOS prints it: the seconds and microseconds, then the local time (boot records it)."""
    sec, usec = state.runtime("boottime", [0, 0])
    return f"{{ sec = {sec}, usec = {usec} }} {time.strftime('%a %b %e %H:%M:%S %Y', time.localtime(sec))}"


def values() -> dict[str, str]:
    node = state.node()
    total, perf, eff = (int(n) for n in state.cores(node)[:3])
    major, minor = (node["os_version"].split(".") + ["0"])[:2]
    keys = {
        "hw.ncpu": total,
        "hw.physicalcpu": total,
        "hw.logicalcpu": total,
        "hw.activecpu": total,
        "hw.memsize": node["memory_gb"] * 1024**3,
        "hw.model": node["model_id"],
        "hw.pagesize": 16384,
        "hw.optional.arm64": 1,
        "hw.perflevel0.physicalcpu": perf,
        "hw.perflevel1.physicalcpu": eff,
        "hw.nperflevels": 2,
        "kern.ostype": "Darwin",
        # Darwin's major version trails macOS 26's by one (macOS 26.2 is Darwin 25.2.0).
        "kern.osrelease": f"{int(major) - 1}.{minor}.0",
        "kern.osversion": node["os_build"],
        "kern.osproductversion": node["os_version"],
        "kern.hostname": names.kernel_hostname(),
        "kern.boottime": boottime(),
        "machdep.cpu.brand_string": node["chip"],
        "machdep.cpu.core_count": total,
        "machdep.cpu.thread_count": total,
        "sysctl.proc_translated": 0,
    }
    if not node.get("apple_silicon", True):
        # Intel Macs have no arm64 keys at all; reading one is an unknown oid.
        for key in ("hw.optional.arm64", "hw.perflevel0.physicalcpu", "hw.perflevel1.physicalcpu", "hw.nperflevels"):
            del keys[key]
    keys.update(WRITABLE)
    keys.update(state.runtime("sysctl", {}))
    return {k: str(v) for k, v in sorted(keys.items())}


def write(name: str, value: str, table: dict[str, str], quiet: bool) -> None:
    if name not in table:
        raise Fail(f"sysctl: unknown oid '{name}'\n", 1)
    if name not in WRITABLE:
        raise Fail(f"sysctl: oid '{name}' is read only\n", 1)
    if not state.is_root():
        raise Fail(f"sysctl: {name}={value}: Operation not permitted\n", 1)
    if not value.isdigit():
        raise Fail(f"sysctl: invalid integer '{value}'\n", 1)
    runtime = state.runtime("sysctl", {})
    runtime[name] = int(value)
    state.save_runtime("sysctl", runtime)
    if not quiet:
        out(f"{name}: {table[name]} -> {int(value)}\n")


def main(argv: list[str]) -> int:
    flags = {a for a in argv if a.startswith("-")}
    args = [a for a in argv if not a.startswith("-")]
    quiet = "-n" in flags
    table = values()
    if "-a" in flags and not args:
        args = list(table)
    status = 0
    for arg in args:
        if "=" in arg:
            write(*arg.split("=", 1), table, quiet)
            continue
        matches = [k for k in table if k == arg or k.startswith(arg + ".")]
        if not matches:
            err(f"sysctl: unknown oid '{arg}'\n")
            status = 1
        for key in matches:
            out(table[key] + "\n" if quiet else f"{key}: {table[key]}\n")
    return status
