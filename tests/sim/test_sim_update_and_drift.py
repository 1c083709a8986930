"""A package installed by hand in a node's environment (sim pip) and a macOS update (sim update)."""

from __future__ import annotations

import base64
import hashlib
import zipfile

import pytest

from simlib import Sim

pytestmark = pytest.mark.sim
ENV = "/opt/mlx-fleet/venv"


@pytest.fixture(scope="module")
def sim():
    cluster = Sim(nodes=1)
    # An environment like mlx_env's: made by the admin user, without pip of its own (uv venv).
    cluster.cli("exec", "mini-1", "--", "sh", "-c", f"mkdir -p /opt/mlx-fleet && /usr/bin/python3 -m venv "
                f"--without-pip {ENV} && chown -R admin:staff /opt/mlx-fleet")
    yield cluster
    cluster.down()


def _wheel(folder, version: str) -> str:
    """A one-module wheel, built by hand: the sim has no index to download from."""
    dist = f"macsimdrift-{version}.dist-info"
    files = {
        "macsimdrift/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: macsimdrift\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: macsim-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}\n" for name, text in files.items())
    files[f"{dist}/RECORD"] = record + f"{dist}/RECORD,,\n"
    path = folder / f"macsimdrift-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    path.chmod(0o644)
    return str(path)


def _installed(sim) -> list[str]:
    """The package's version in the environment and the owner of its files."""
    probe = sim.ssh("mini-1", f"{ENV}/bin/python -c 'import macsimdrift, os, pwd; print(macsimdrift.VERSION, "
                    "pwd.getpwuid(os.stat(macsimdrift.__file__).st_uid).pw_name)'", own_config=True)
    return probe.stdout.split()


def test_a_package_installed_and_upgraded_by_hand_offline(sim):
    wheels = sim.dir / "wheels"  # a folder the node shares with the host (not one of its own)
    wheels.mkdir(mode=0o755)
    assert sim.cli("pip", "mini-1", "--", "install", _wheel(wheels, "1.0")).returncode == 0
    assert _installed(sim) == ["1.0", "admin"]
    assert sim.cli("pip", "mini-1", "--", "install", "--upgrade", _wheel(wheels, "2.0")).returncode == 0
    assert _installed(sim) == ["2.0", "admin"]
    offline = sim.cli("pip", "mini-1", "--", "install", "requests", check=False)
    assert offline.returncode == 1 and "No matching distribution found for requests" in offline.stderr
    missing = sim.cli("pip", "--env", "/opt/none", "mini-1", "--", "list", check=False)
    assert missing.returncode == 2 and "/opt/none" in missing.stderr.split() and "mini-1;" in missing.stderr.split()


def test_a_macos_update_turns_rdma_off_and_may_turn_the_bridge_back_on(sim):
    sim.cli("update", "mini-1", "--macos-build", "25C60", "--keep-rdma")
    assert sim.ssh("mini-1", "sw_vers -buildVersion; rdma_ctl status", own_config=True).stdout == "25C60\nenabled\n"

    sim.ssh("mini-1", "sudo networksetup -setnetworkserviceenabled 'Thunderbolt Bridge' off", own_config=True)
    out = sim.cli("update", "mini-1", "--macos-version", "26.3", "--macos-build", "25D125", "--reenable-bridge").stdout
    assert "restarted; RDMA disabled" in out
    after = sim.ssh("mini-1", "sw_vers -productVersion; sw_vers -buildVersion; rdma_ctl status; "
                    "networksetup -listnetworkserviceorder | grep 'Thunderbolt Bridge$'", own_config=True).stdout
    assert after.split("\n")[:4] == ["26.3", "25D125", "disabled", "(3) Thunderbolt Bridge"]
    assert "rdma_" not in sim.ssh("mini-1", "ibv_devices", own_config=True).stdout
