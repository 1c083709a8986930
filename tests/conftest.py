"""Shared test set-up: the collection importable by its FQCN, capture loading, sim fixtures.

The only conftest.py: test modules import names from it (`from conftest import load`), which
would be ambiguous with a second one."""

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# collections/ansible_collections/mlx_fleet/cluster links back to the repository root.
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO / "tests" / "sim"))

FIXTURE_DIR = REPO / "tests" / "fixtures" / "macos"

# The heaviest property tests run a fifth of their examples (still hundreds of inputs each) unless
# MLX_FLEET_DEEP_PROPERTIES=1 asks for the full count, e.g. after changing a reader they feed.
DEEP_PROPERTIES = os.environ.get("MLX_FLEET_DEEP_PROPERTIES") == "1"


def examples(deep: int) -> int:
    """A property test's number of examples: `deep` with MLX_FLEET_DEEP_PROPERTIES=1, else a fifth of it."""
    return deep if DEEP_PROPERTIES else deep // 5


# A prompt line the source kept: "% cmd", "~ % cmd", "$ cmd", "user@host dir % cmd".
_PROMPT = re.compile(r"^(?:\S+(?: \S+)* )?[%$] \S")


def load(path):
    """The published output: without the '# source:' line and a leading prompt line."""
    lines = path.read_text().split("\n")
    assert lines[0].startswith("# source: "), path.name
    body = lines[1:]
    if body and _PROMPT.match(body[0]):
        body = body[1:]
    return "\n".join(body)


WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # make test runs the suite on xdist workers (tests/xdist_worker)


def pytest_configure(config):
    if WORKER and os.geteuid() == 0:
        _own_ssh_drop_ins()


def _own_ssh_drop_ins():
    """This worker's folder of ssh drop-ins, over /etc/ssh/ssh_config.d in its own mount namespace, with the
    machine's own drop-ins copied: a plain `ssh mini-1` (MLX's tools) reaches this worker's mini-1, whatever
    another worker's clusters call their Macs."""
    if os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt"):  # the run's own
        raise pytest.UsageError("xdist workers run as root need a mount namespace of their own: "
                                "--tx 'popen//python=tests/xdist_worker .venv/bin/python' (make test)")
    from mlx_fleet.sim.host import DROP_IN_DIR, DROP_IN_GLOB

    kept = {p.name: p.read_bytes() for p in DROP_IN_DIR.glob("*.conf") if not p.match(DROP_IN_GLOB)}
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "mlx-fleet-tests", str(DROP_IN_DIR)],
                   check=True)
    for name, data in kept.items():
        (DROP_IN_DIR / name).write_bytes(data)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked `alone` runs while no other worker runs a test (its fixtures' set-up and teardown
    included); the others share the machine. A turnstile first, so a waiting `alone` test is not starved."""
    if not WORKER:
        return (yield)
    folder = item.config._tmp_path_factory.getbasetemp().parent  # the run's, shared by its workers
    with open(folder / "turnstile.lock", "w") as turnstile, open(folder / "machine.lock", "w") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if item.get_closest_marker("alone") else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        return (yield)  # the machine's lock goes with its file


def pytest_collection_modifyitems(items):
    if WORKER:  # the simulated clusters' files first, in their order, the short unit files filling in at the end
        items.sort(key=lambda item: REPO / "tests" / "sim" not in item.path.parents)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="macsim needs root")
        for item in items:
            if "sim" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def make_sim():
    """Build simulated clusters with the real `mlx-fleet sim up`; all are taken down afterwards."""
    from simlib import Sim

    made = []

    def make(**up_args):
        sim = Sim(**up_args)
        made.append(sim)
        return sim

    yield make
    for sim in made:
        sim.down()


# One converged 4-Mac ring for the session's tests that only need one (verify, run, run's check, ps and stop):
# names of its own (other clusters may be up), its fabric configured and the environment's interpreter in place,
# saved as the snapshot CONVERGED_RING; each module gets it restored to that snapshot.
RING = ["vring-1", "vring-2", "vring-3", "vring-4"]
CONVERGED_RING = "converged"
RING_ENV = "/opt/mlx-fleet/venv"  # mlx_env_path's default: the cluster's environment


@pytest.fixture(scope="session")
def shared_ring(tmp_path_factory):
    from simlib import Sim, converged, plan

    cables = [f"{RING[i]}:2 -- {RING[(i + 1) % 4]}:1" for i in range(4)]
    sim = converged(Sim(topology=plan(tmp_path_factory.mktemp("plans") / "ring.yml", RING, cables), rdma="none"))
    for node in RING:  # the environment's interpreter, as a converge leaves it (the env step is not needed here)
        sim.cli("exec", node, "--", "sh", "-c",
                f"mkdir -p {RING_ENV}/bin && ln -sf \"$(command -v python3)\" {RING_ENV}/bin/python")
    sim.cli("snapshot", CONVERGED_RING)
    yield sim
    sim.down()


@pytest.fixture(scope="module")
def ring(shared_ring):
    """The shared ring, as converged, for one module."""
    shared_ring.cli("restore", CONVERGED_RING)
    return shared_ring


@pytest.fixture
def changed_ring(ring):
    """The ring for a test that changes it and leaves it so: restored to its converged snapshot afterwards."""
    yield ring
    ring.cli("restore", CONVERGED_RING)


class ModuleExit(Exception):
    """A module's exit_json or fail_json, raised so the test gets what it returned."""

    def __init__(self, result: dict):
        super().__init__(result.get("msg"))
        self.result = result


@pytest.fixture
def run_module(monkeypatch):
    """run(main, args): a module's main() as Ansible runs it (AnsibleModule reads args, including
    _ansible_check_mode and _ansible_diff); returns its result, with failed=True from fail_json."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def exit_json(self, **result):
        raise ModuleExit(result)

    def fail_json(self, msg, **result):
        raise ModuleExit(dict(result, failed=True, msg=msg))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def run(main, args: dict) -> dict:
        with patch_module_args(args), pytest.raises(ModuleExit) as done:
            main()
        return done.value.result

    return run


@pytest.fixture
def netns(tmp_path):
    """run(tool, *args): a macOS double run in a throwaway network namespace with real veths (en0, en2) and a
    bridge0, as a simulated Mac mini-9 (root and iproute2 needed)."""
    from mlx_fleet.sim import doubles

    dispatch = str(doubles.HERE / "dispatch.py")
    name = f"dbltest-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for dev, peer in (("en0", "p0"), ("en2", "p2")):
            subprocess.run(["ip", "-n", name, "link", "add", dev, "type", "veth", "peer", "name", peer], check=True)
            subprocess.run(["ip", "-n", name, "link", "set", peer, "up"], check=True)
        subprocess.run(["ip", "-n", name, "link", "add", "bridge0", "type", "bridge"], check=True)
        node = {
            "name": "mini-9", "model": "mini-m4-pro", "model_name": "Mac mini", "model_id": "Mac16,11",
            "chip": "Apple M4 Pro", "cpu_cores": "14 (10 performance and 4 efficiency)", "memory_gb": 64,
            "serial": "S", "hardware_uuid": "U", "provisioning_udid": "P", "os_version": "26.2", "os_build": "25C56",
            "boot_rom": "1", "rdma_enabled": True, "in_recovery": False,
            "interfaces": [{"hardware_port": "Ethernet", "device": "en0", "mac": "3c:a6:f6:00:00:01", "management": True},
                           {"hardware_port": "Thunderbolt 1", "device": "en2", "mac": "36:4d:04:ea:4e:40"}],
            "management": {"device": "en0", "ip": "10.213.9.11", "prefix": 24, "router": "10.213.9.1"},
            "thunderbolt": [{"receptacle": 1, "bus": 0, "device": "en2", "domain_uuid": "D", "switch_uid": "0x1",
                             "generation": 5, "rdma_ok": True, "link": None}],
        }
        path = tmp_path / "usr/local/libexec/macsim/node.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(node))

        def run(tool, *args):
            return subprocess.run(["ip", "netns", "exec", name, sys.executable, dispatch, tool, *args],
                                  env=dict(os.environ, MACSIM_ROOT=str(tmp_path)), capture_output=True, text=True)

        yield run
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


# The models' sim tests that need a ring (models sync, its faults, its token) share the session's ring too: prepared
# for `models sync` (the models' lock beside the environment's, no model declared, the cables' addresses in the
# cluster model) and saved as the snapshot MODELS_RING, the Hub stand-in stopped (a restore would drop its record).
MODELS_RING = "models"


@pytest.fixture(scope="session")
def models_ready(shared_ring):
    from simlib import ModelsCluster

    shared_ring.cli("restore", CONVERGED_RING)
    ModelsCluster(shared_ring, shared_ring.dir / "controller-hf")
    shared_ring.cli("hub", "stop")
    shared_ring.cli("snapshot", MODELS_RING)
    return shared_ring


@pytest.fixture(scope="module")
def models_ring(models_ready, request):
    """The ring as prepared for `models sync`, for one module, with a Hub stand-in of the module's HUB_ARGS (its
    faults) and a controller's Hub cache in the cluster's folder (a restore removes it); the stand-in stopped after."""
    from simlib import ModelsCluster

    models_ready.cli("restore", MODELS_RING)
    yield ModelsCluster.prepared(models_ready, models_ready.dir / "controller-hf",
                                 *getattr(request.module, "HUB_ARGS", ()))
    models_ready.cli("hub", "stop")


# The models' sim tests on a 3-Mac line (models status, audit, record, prune): one line for the session, names of its
# own (other clusters may be up), saved as built (the snapshot BUILT_LINE) and restored for each test.
MODELS_LINE = ["mline-1", "mline-2", "mline-3"]
BUILT_LINE = "built"


@pytest.fixture(scope="session")
def shared_line(tmp_path_factory):
    from simlib import Sim, plan

    cables = [f"{a}:2 -- {b}:1" for a, b in zip(MODELS_LINE, MODELS_LINE[1:])]
    sim = Sim(topology=plan(tmp_path_factory.mktemp("plans") / "line.yml", MODELS_LINE, cables))
    sim.cli("snapshot", BUILT_LINE)
    yield sim
    sim.down()


@pytest.fixture
def line(shared_line):
    """The shared line as built, for one test."""
    shared_line.cli("restore", BUILT_LINE)
    return shared_line
