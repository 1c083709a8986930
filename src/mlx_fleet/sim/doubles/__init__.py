"""The macOS doubles a simulated Mac runs, and how the controller installs them.

``install_doubles(fs_root)`` copies the stdlib-only ``macsim`` package and
``dispatch.py`` into the node's private filesystem and writes a shim per tool in
``/usr/local/bin`` plus the root-only boot program ``/usr/local/libexec/macsim/boot``,
and gives the node's Python the cache of Ansible's compiled module payloads
(macsim_payload_code.py).
"""

import functools
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBDIR = "usr/local/libexec/macsim/lib"
BOOT = "usr/local/libexec/macsim/boot"

TOOLS = (
    "system_profiler", "networksetup", "ifconfig", "route", "ipconfig", "sw_vers", "sysctl",
    "pmset", "scutil", "systemsetup", "xcode-select", "softwareupdate", "hostname",
    "ibv_devices", "ibv_devinfo", "rdma_ctl", "launchctl", "netstat", "ps", "defaults", "fdesetup",
)


def _shim(tool: str) -> str:
    # -S: the doubles are stdlib only, and a Mac's tools are native: no site-packages scan (.pth files)
    # on each of the hundreds of calls a converge makes.
    return f'#!/bin/sh\nexec /usr/bin/python3 -S /{LIBDIR}/dispatch.py {tool} "$@"\n'


def install_doubles(fs_root: Path) -> None:
    """Install (or refresh) the doubles under ``fs_root``, the node's view of ``/``."""
    fs_root = Path(fs_root)
    lib = fs_root / LIBDIR
    if lib.exists():
        shutil.rmtree(lib)
    lib.mkdir(parents=True)
    shutil.copytree(HERE / "macsim", lib / "macsim", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(HERE / "dispatch.py", lib / "dispatch.py")
    # Compiled once by the nodes' interpreter: a tool first run by a user who cannot write __pycache__
    # would otherwise compile its modules at every call.
    subprocess.run(["/usr/bin/python3", "-m", "compileall", "-q", str(lib)], check=True, stdin=subprocess.DEVNULL)
    bin_dir = fs_root / "usr/local/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        shim = bin_dir / tool
        shim.write_text(_shim(tool))
        shim.chmod(0o755)
    boot = fs_root / BOOT
    boot.write_text(_shim("boot"))
    boot.chmod(0o700)  # root only: it configures the node
    site = _local_site_packages()
    if site:
        folder = fs_root / site.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(HERE / "macsim_payload_code.py", folder / "macsim_payload_code.py")
        (folder / "macsim_payload_code.pth").write_text("import macsim_payload_code\n")


@functools.cache
def _local_site_packages() -> str | None:
    """The site-packages folder under /usr/local that the nodes' /usr/bin/python3 reads (Debian's
    /usr/local/lib/python3.X/dist-packages); None if it reads none (then no module payload is cached)."""
    found = subprocess.run(["/usr/bin/python3", "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
                           capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stdout
    return next((path for path in found.split() if path.startswith("/usr/local/")), None)
