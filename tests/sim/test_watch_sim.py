"""`mlx-fleet watch --every 5` on a converged 4-Mac ring, one cluster and one watch for the whole module:
a pulled cable is reported within two rounds naming both ends and cleared when plugged back (and the
status page, rendered by headless Chromium, shows it red meanwhile); a Mac off the network is reported
down and back; the bridge re-enabled by hand and a reboot are each reported once; metrics.prom parses with
Prometheus' own parser at every round; --on-change gets every event exactly once; Ctrl-C ends it with a
summary. Then --once against the last good state exits 0, 1 or 4 as the audit does."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_parsers import parse_ibv_devinfo
from simlib import BIN, MLX_FLEET, Sim

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
RING = ["mini-1", "mini-2", "mini-3", "mini-4"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
EVERY = 5
ROUND_WAIT = 120  # seconds to wait for the rounds an assertion needs (a round is about EVERY s)


def playbook(sim: Sim, name: str) -> None:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"),
                           str(REPO / "playbooks" / name)], capture_output=True, text=True, env=env, timeout=300,
                          cwd="/", stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr


class Watching:
    """A running `mlx-fleet watch`, its files, and a reader that parses metrics.prom at every round."""

    def __init__(self, sim: Sim, folder: Path):
        self.sim, self.out, self.hook_log = sim, folder / "watch", folder / "hook.jsonl"
        hook = f"cat >> {self.hook_log}; echo >> {self.hook_log}"
        self.stdout = open(folder / "watch.out", "w+")
        self.process = subprocess.Popen([MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--every",
                                         str(EVERY), "--out", str(self.out), "--on-change", hook],
                                        stdout=self.stdout, stderr=subprocess.STDOUT, text=True)
        self.parsed: dict[float, dict] = {}  # the round's timestamp -> its samples
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.reader = threading.Thread(target=self.read_metrics, daemon=True)
        self.reader.start()

    def read_metrics(self) -> None:
        while not self.stop.is_set():
            self.read_once()
            time.sleep(0.2)
        self.read_once()  # the last round's file, written just before the watch stopped

    def read_once(self) -> None:
        try:
            text = (self.out / "metrics.prom").read_text()
        except FileNotFoundError:
            return
        try:
            samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                       for family in text_string_to_metric_families(text) for s in family.samples}
            stamp = samples[("mlx_fleet_watch_last_round_timestamp_seconds", ())]
            self.parsed.setdefault(stamp, samples)
        except Exception as exc:  # noqa: BLE001 - any failure to parse is what the test looks for
            self.errors.append(f"{exc}: {text[:200]!r}")

    def status(self) -> dict:
        return json.loads((self.out / "status.json").read_text())

    def round(self) -> int:
        try:
            return self.status()["round"]
        except FileNotFoundError:
            return 0

    def events(self) -> list[dict]:
        """Every event --on-change received, in order."""
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]

    def wait_for(self, wanted, rounds: int = 2) -> dict:
        """The first event matching wanted (a dict of fields) and reported within ROUNDS rounds from now."""
        assert self.process.poll() is None, self.output()
        start = self.round()
        deadline = time.monotonic() + ROUND_WAIT
        while time.monotonic() < deadline:
            match = [e for e in self.events() if all(e.get(k) == v for k, v in wanted.items())
                     and e["round"] > start]
            if match:
                assert match[0]["round"] <= start + rounds, (match[0], start)
                return match[0]
            if self.round() > start + rounds:
                break
            time.sleep(0.2)
        raise AssertionError(f"no event {wanted} within {rounds} rounds of round {start}:\n{self.output()}")

    def settle(self) -> None:
        """Wait for a whole round after now."""
        start = self.round()
        deadline = time.monotonic() + ROUND_WAIT
        while self.round() < start + 2 and time.monotonic() < deadline:
            time.sleep(0.2)

    def output(self) -> str:
        self.stdout.flush()
        return Path(self.stdout.name).read_text()

    def interrupt(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=60)
        self.stop.set()
        self.reader.join(timeout=5)
        return code, self.output()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sim = Sim(nodes=4, topology="ring", rdma="all")
    try:
        playbook(sim, "node.yml")  # system sleep off, as a converged Mac has it
        playbook(sim, "fabric.yml")  # the cables' addresses, the bridge off, the address ledger
        yield sim, tmp_path_factory.mktemp("watch")
    finally:
        sim.down()


@pytest.fixture(scope="module")
def watching(cluster):
    sim, folder = cluster
    run = Watching(sim, folder)
    yield run
    if run.process.poll() is None:
        run.process.kill()
        run.process.wait()
    run.stop.set()


def red_pixels(page: Path, folder: Path) -> int:
    shot = folder / f"shot-{time.monotonic_ns()}.png"
    subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'chromium'}", f"--screenshot={shot}",
                    "--window-size=1200,1400", page.as_uri()], capture_output=True, timeout=120, check=True)
    data = Image.open(shot).convert("RGB").tobytes()
    return sum(1 for i in range(0, len(data), 3) if data[i] > 180 and data[i + 1] < 80 and data[i + 2] < 80)


def test_a_clean_cluster_says_nothing_and_its_page_has_no_red(watching, cluster):
    watching.settle()
    assert watching.events() == [], watching.output()
    assert watching.status()["findings"] == {}
    assert red_pixels(watching.out / "status.html", cluster[1]) == 0


def test_a_pulled_cable_is_named_by_both_ends_then_cleared(watching, cluster):
    sim, folder = cluster
    sim.cli("unplug", "mini-2:2")
    out = watching.wait_for({"event": "cable", "state": "new"})
    assert out["cable"] == "mini-2:2 -- mini-3:1" and out["macs"] == ["mini-2", "mini-3"]
    assert out["ports"] == [["mini-2", 2], ["mini-3", 1]]
    (finding,) = watching.status()["findings"].values()
    assert (finding["kind"], finding["macs"], finding["cable_ends"]) == (
        "cable", ["mini-2", "mini-3"], [["mini-2", 2], ["mini-3", 1]])
    assert finding["found"].count("sees no link") == 2
    # The page, as a browser draws it: the cable out in red (and nothing red once it is back).
    page = (watching.out / "status.html").read_text()
    assert "OUT: TB2 &#45;&#45; TB1" in page  # Graphviz writes the hyphens as entities
    assert red_pixels(watching.out / "status.html", folder) > 200
    sim.cli("plug", "mini-2:2", "mini-3:1")
    back = watching.wait_for({"event": "cable", "state": "cleared"})
    assert back["cable"] == "mini-2:2 -- mini-3:1"
    assert red_pixels(watching.out / "status.html", folder) == 0


def test_a_mac_off_the_network_is_down_then_back(watching, cluster):
    sim, _ = cluster
    sim.cli("link", "mini-4", "down")
    down = watching.wait_for({"event": "unreachable", "state": "new"})
    assert down["macs"] == ["mini-4"]
    sim.cli("link", "mini-4", "up")
    back = watching.wait_for({"event": "unreachable", "state": "cleared"})
    assert back["macs"] == ["mini-4"]


def test_the_bridge_turned_on_by_hand_is_said_once(watching, cluster):
    sim, _ = cluster
    sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "on")
    on = watching.wait_for({"event": "bridge", "state": "new"})
    assert on["macs"] == ["mini-1"] and on["key"] == "bridge mini-1"
    watching.settle()
    assert [e["state"] for e in watching.events() if e["event"] == "bridge"] == ["new"]
    sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off")
    watching.wait_for({"event": "bridge", "state": "cleared"})


def test_a_reboot_is_said_once(watching, cluster):
    sim, _ = cluster
    sim.cli("reboot", "mini-3")
    reboot = watching.wait_for({"event": "reboot"}, rounds=3)  # the reboot itself takes part of a round
    assert reboot["macs"] == ["mini-3"] and reboot["message"].startswith("mini-3 restarted (booted ")
    watching.settle()
    assert [e["event"] for e in watching.events()].count("reboot") == 1


def test_every_round_parsed_every_event_hooked_once_and_ctrl_c_summarises(watching):
    code, output = watching.interrupt()
    assert code == 130
    assert "watch stopped after " in output and "nothing wrong now" in output
    rounds = watching.round()
    assert watching.errors == []
    assert len(watching.parsed) == rounds  # the reader parsed every round's file
    assert all(s[("mlx_fleet_mac_up", (("mac", m),))] in (0, 1) for s in watching.parsed.values() for m in RING)
    events = watching.events()
    assert len({(e["key"], e["state"], e["round"]) for e in events}) == len(events)
    # Each event printed once too, and each --on-change run got exactly one.
    printed = [line for line in output.splitlines() if line[:2].isdigit() and line[2] == ":"]
    assert [line.split(" ", 2)[2] for line in printed] == [e["message"] for e in events]


def test_once_against_the_last_good_state(watching, cluster):
    sim, _ = cluster
    argv = [MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--out", str(watching.out), "--once"]
    clean = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert (clean.returncode, clean.stdout.splitlines()[-1]) == (0, "result: ok (exit 0)"), clean.stdout
    sim.cli("unplug", "mini-1:1")
    pulled = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert pulled.returncode == 1 and "cable mini-1:1 -- mini-2:1 is out" in pulled.stdout
    sim.cli("link", "mini-2", "down")
    try:
        down = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("link", "mini-2", "up")
        sim.cli("plug", "mini-1:1", "mini-2:1")
    assert down.returncode == 4 and down.stdout.splitlines()[-1] == "result: unreachable: mini-2 (exit 4)"


def test_explain_with_the_macs_tells_the_bridge_from_a_lost_address(watching, cluster):
    sim, _ = cluster
    log = REPO / "tests/fixtures/logs/stale-rdma__exo-explore-exo-1847.log"
    argv = [MLX_FLEET, "explain", str(log), "-i", str(sim.dir / "inventory.yml")]
    alone = subprocess.run([MLX_FLEET, "explain", str(log)], capture_output=True, text=True, timeout=60)
    assert alone.stdout.splitlines()[0] == "cause: stale-rdma or no-ipv4" and "also possible: bridge" in alone.stdout

    sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "on")
    try:
        bridge = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off")
    assert bridge.stdout.splitlines()[0] == "cause: bridge", bridge.stdout
    assert "mini-1: the Thunderbolt Bridge" in bridge.stdout  # the finding that confirms it, naming its Mac

    device = sim.device("mini-2", 1)
    # This cluster's ssh_config: other clusters on the machine may answer to the name mini-2 too.
    shown = sim.ssh("mini-2", f"ifconfig {device}", own_config=True).stdout
    inet = next(line.split()[1] for line in shown.splitlines() if line.split()[:1] == ["inet"])
    sim.cli("exec", "mini-2", "--", "ifconfig", device, "inet", inet, "delete")
    try:
        address = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("reboot", "mini-2")  # the port's service gives the address back at boot
    assert address.stdout.splitlines()[0] == "cause: no-ipv4", address.stdout
    assert f"mini-2 Thunderbolt 1 ({device}) has no IPv4 address where the fabric gave it {inet}" in address.stdout


EXO_PLIST = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict><key>Label</key><string>io.exo.networksetup</string>
<key>ProgramArguments</key><array><string>/usr/bin/true</string></array></dict></plist>
"""


def test_the_checks_users_reports_asked_for_fire_when_set_by_hand(watching, cluster):
    sim, folder = cluster
    argv = [MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--out", str(folder / "field"), "--once"]
    hostfile = sim.dir / ".mlx-fleet" / "hostfile.json"
    original = hostfile.read_text()
    services = ["Ethernet", "Wi-Fi", "Thunderbolt Bridge", "Thunderbolt 1", "Thunderbolt 2"]
    sim.cli("exec", "mini-3", "--", "networksetup", "-ordernetworkservices", "Thunderbolt 1",
            *[s for s in services if s != "Thunderbolt 1"])
    plist = sim.dir / "nodes" / "mini-4" / "fs" / "Library" / "LaunchDaemons" / "io.exo.networksetup.plist"
    plist.write_text(EXO_PLIST)
    sim.cli("exec", "mini-4", "--", "launchctl", "bootstrap", "system", "/Library/LaunchDaemons/io.exo.networksetup.plist")
    data = json.loads(original)
    hostfile.write_text(json.dumps(dict(data, envs=data["envs"] + ["MLX_METAL_FAST_SYNCH=1"]), indent=4))
    sim.cli("set", "mini-1", "filevault=true")
    try:
        found = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("set", "mini-1", "filevault=false")
        hostfile.write_text(original)
        sim.cli("exec", "mini-3", "--", "networksetup", "-ordernetworkservices", *services)
        sim.cli("exec", "mini-4", "--", "launchctl", "bootout", "system/io.exo.networksetup")
        plist.unlink()
    print(found.stdout)
    assert found.returncode == 1, found.stdout
    findings = json.loads((folder / "field" / "status.json").read_text())["findings"].values()
    by_kind = {f["kind"]: f for f in findings}
    assert {kind: by_kind[kind]["macs"] for kind in ("service-order", "network-manager", "fast-synch", "filevault")} == {
        "service-order": ["mini-3"], "network-manager": ["mini-4"], "fast-synch": ["mini-1", "mini-2", "mini-3", "mini-4"],
        "filevault": ["mini-1"]}, findings
    assert by_kind["service-order"]["found"].startswith("Thunderbolt 1 (1) ")
    assert by_kind["service-order"]["fix"] == ("sudo networksetup -ordernetworkservices Ethernet Wi-Fi 'Thunderbolt 1' "
                                               "'Thunderbolt Bridge' 'Thunderbolt 2'")
    assert by_kind["network-manager"]["found"].startswith("io.exo.networksetup ")
    assert by_kind["fast-synch"]["found"].startswith("MLX_METAL_FAST_SYNCH=1 ")
    clean = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stdout


def test_a_wedged_rdma_stack_is_stale_rdma_and_a_restart_clears_it(watching, cluster):
    sim, folder = cluster
    argv = [MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--out", str(folder / "stale"), "--once",
            "--rdma-timeout", "2"]
    sim.cli("set", "mini-2", "rdma_wedged=true")  # ibv_devinfo now hangs, as on a Mac after hours of jobs
    try:
        wedged = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("reboot", "mini-2")
    assert wedged.returncode == 1, wedged.stdout
    stale = [f for f in json.loads((folder / "stale" / "status.json").read_text())["findings"].values()
             if f["kind"] == "stale-rdma"]
    assert [(f["macs"], f["fix"].startswith("reboot mini-2: ")) for f in stale] == [(["mini-2"], True)]
    after = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0 and "reboot: mini-2 restarted" in after.stdout, after.stdout


def test_a_port_whose_address_is_removed_by_hand_loses_its_ipv4_mapped_gid(watching, cluster):
    sim, folder = cluster
    argv = [MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--out", str(folder / "gid"), "--once"]
    device = sim.device("mini-3", 2)
    shown = sim.ssh("mini-3", f"ifconfig {device}", own_config=True).stdout
    inet = next(line.split()[1] for line in shown.splitlines() if line.split()[:1] == ["inet"])
    table = sim.ssh("mini-3", f"ibv_devinfo -v -d rdma_{device}", own_config=True).stdout
    # rdma-core's line for the port's IPv4 (its index follows the link-local IPv6 GID when the port has one).
    assert re.search(rf"\n\t\t\tGID\[ *\d+\]:\t\t::ffff:{re.escape(inet)}, RoCE v2\n", table), table
    sim.cli("exec", "mini-3", "--", "ifconfig", device, "inet", inet, "delete")
    try:
        table = sim.ssh("mini-3", f"ibv_devinfo -v -d rdma_{device}", own_config=True).stdout
        found = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        sim.cli("reboot", "mini-3")  # the port's service gives the address back at boot
    print(found.stdout)
    assert "::ffff:" not in table, table
    assert found.returncode == 1, found.stdout
    listed = ", ".join(parse_ibv_devinfo(table)[f"rdma_{device}"]["gids"][1]) or "an empty GID table"
    gids = [f for f in json.loads((folder / "gid" / "status.json").read_text())["findings"].values()
            if f["kind"] == "rdma-gid"]
    assert [(f["macs"], f["ports"]) for f in gids] == [(["mini-3"], [["mini-3", 2]])], gids
    assert f"rdma_{device} " in gids[0]["found"] and f"(it lists {listed})" in gids[0]["found"]
    after = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert "rdma-gid" not in after.stdout, after.stdout


def test_the_fabric_step_puts_the_thunderbolt_services_back_last(watching, cluster):
    sim, folder = cluster
    argv = [MLX_FLEET, "watch", "-i", str(sim.dir / "inventory.yml"), "--out", str(folder / "order"), "--once"]
    services = ["Ethernet", "Wi-Fi", "Thunderbolt Bridge", "Thunderbolt 1", "Thunderbolt 2"]
    sim.cli("exec", "mini-2", "--", "networksetup", "-ordernetworkservices", "Thunderbolt 2",
            *[s for s in services if s != "Thunderbolt 2"])
    try:
        found = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert found.returncode == 1 and " service-order: mini-2: " in found.stdout, found.stdout
        playbook(sim, "fabric.yml")  # converge's fabric step
    finally:
        order = sim.ssh("mini-2", "networksetup -listnetworkserviceorder", own_config=True).stdout
        if order.index("Thunderbolt 2") < order.index("Ethernet"):
            sim.cli("exec", "mini-2", "--", "networksetup", "-ordernetworkservices", *services)
    assert order.index("Thunderbolt 2") > order.index("Wi-Fi") > order.index("Ethernet"), order
    after = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert "service-order" not in after.stdout, after.stdout
