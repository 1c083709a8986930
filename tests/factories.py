"""Facts as the modules return them, and the states built from them, shared by the test modules
(no test module imports another)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import audit_report
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import run_audit
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.fabric import build_fabric, cable_ends, cable_speeds
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import node_problems
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS, link_speed
from mlx_fleet.sim.layout import generated_cables

REPO = Path(__file__).resolve().parents[1]


# --- thunderbolt_facts and macos_facts of a cabled cluster, for the fabric ----------------------------


def port_uuid(host, number):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{host}:{number}")).upper()


def mac_fact(host, model_key, *, rdma=True, bridge=False):
    """An idle Mac: every port empty, rated at its generation's speed."""
    model = MODELS[model_key]
    devices = [device for _, device in model.thunderbolt_devices]
    ports = [{"receptacle": n, "bus": f"thunderboltusb4_bus_{n - 1}", "hardware_port": f"Thunderbolt {n}",
              "device": device, "rdma_device": f"rdma_{device}" if rdma else None, "rdma_state": None,
              "domain_uuid": port_uuid(host, n), "speed_gbps": 120 if model.tb_generation >= 5 else 40,
              "speed_is_max": True, "connected": False, "peers": [], "devices": []}
             for n, device in model.thunderbolt_devices]
    return {"ports": ports,
            "bridge": {"device": "bridge0", "active": bridge, "members": devices if bridge else [],
                       "service_enabled": bridge},
            "rdma_enabled": rdma, "rdma_devices": [f"rdma_{d}" for d in devices] if rdma else []}


def macos_fact(model_key):
    """mlx_fleet_macos of a Mac of this model on macOS 26.2, as far as the RDMA judgement reads it."""
    model = MODELS[model_key]
    return {"model_name": model.model_name, "model_identifier": model.model_id, "chip": model.chip,
            "product_version": "26.2", "build_version": "25C56", "serial_number": ""}


class Cluster:
    def __init__(self, nodes, *, no_rdma=(), bridge=False):
        """nodes: {host: model key} in inventory order; no_rdma: hosts with RDMA off."""
        self.models = dict(nodes)
        self.facts = {h: mac_fact(h, m, rdma=h not in no_rdma, bridge=bridge) for h, m in nodes.items()}
        self.macos = {h: macos_fact(m) for h, m in nodes.items()}
        self.management = {h: f"10.0.0.{i + 11}" for i, h in enumerate(nodes)}

    @classmethod
    def of(cls, model_key, n, topology="mesh", **kwargs):
        prefix = {"studio-m3-ultra": "studio", "mini-m4-pro": "mini", "mini-m4": "mini"}[model_key]
        cluster = cls({f"{prefix}-{i}": model_key for i in range(1, n + 1)}, **kwargs)
        for c in generated_cables({h: MODELS[m] for h, m in cluster.models.items()}, topology):
            cluster.cable(str(c.a), str(c.b))
        return cluster

    def port(self, end):
        host, number = end.split(":")
        return host, self.facts[host]["ports"][int(number) - 1]

    def cable(self, a, b, speed=None):
        (ha, pa), (hb, pb) = self.port(a), self.port(b)
        speed = speed or link_speed(MODELS[self.models[ha]].tb_generation, MODELS[self.models[hb]].tb_generation)
        # RDMA comes up on a direct cable when both ends have it on, on ports that can carry it.
        active = all(self.facts[h]["rdma_enabled"] and p["receptacle"] not in MODELS[self.models[h]].rdma_broken_ports
                     for h, p in ((ha, pa), (hb, pb)))
        for (host, port), (peer_host, peer) in (((ha, pa), (hb, pb)), ((hb, pb), (ha, pa))):
            model = MODELS[self.models[peer_host]]
            port.update(connected=True, speed_gbps=speed, speed_is_max=False,
                        rdma_state="PORT_ACTIVE" if active else "PORT_DOWN",
                        peers=[{"domain_uuid": peer["domain_uuid"], "model": model.model_id,
                                "name": model.model_name, "direct": True}])
        return self

    def unplug(self, end):
        _, port = self.port(end)
        port.update(connected=False, peers=[], devices=[], speed_is_max=True)
        return self

    def dock(self, a, b, name="TS4"):
        """a and b both plugged into one dock: each sees the other one level down."""
        (ha, pa), (hb, pb) = self.port(a), self.port(b)
        for port, (peer_host, peer) in ((pa, (hb, pb)), (pb, (ha, pa))):
            model = MODELS[self.models[peer_host]]
            port.update(connected=True, speed_gbps=40, speed_is_max=False,
                        devices=[{"name": name, "vendor": "CalDigit", "depth": 1}],
                        peers=[{"domain_uuid": peer["domain_uuid"], "model": model.model_id,
                                "name": model.model_name, "direct": False}])
        return self

    def fabric(self, **kwargs):
        kwargs.setdefault("models", self.models)
        kwargs.setdefault("management_ips", self.management)
        return build_fabric(self.facts, {h: self.macos.get(h, {}) for h in self.facts}, **kwargs)


# --- the same for the RDMA readiness judgement (its own versions and serial numbers) -------------------


# The Recovery checklist's text, one page per Mac.
PAGE = (REPO / "tests" / "fixtures" / "recovery" / "page.txt").read_text()


def expected_text(pages: list[dict], inventory: str, stamp: str) -> str:
    """The text checklist: the fixture page per Mac, a form feed between pages."""
    n = len(pages)
    return "\n\f\n".join(PAGE.format(sheet=f"{i} of {n}", inventory=inventory, stamp=stamp, **page)
                         for i, page in enumerate(pages, 1))


class ReadinessCluster:
    """mlx_fleet_macos and mlx_fleet_thunderbolt facts, as the modules return them, for a cabled cluster."""

    def __init__(self, nodes: dict[str, str], *, disabled=(), version=("26.2", "25C56")):
        self.models = dict(nodes)
        self.macos, self.tb = {}, {}
        for i, (host, key) in enumerate(nodes.items()):
            m = MODELS[key]
            self.macos[host] = {"product_version": version[0], "build_version": version[1],
                                "model_identifier": m.model_id, "model_name": m.model_name, "chip": m.chip,
                                "serial_number": f"SERIAL{i + 1:04d}", "management_address": f"10.0.0.{11 + i}"}
            on = host not in disabled
            self.tb[host] = {
                "ports": [{"receptacle": n, "hardware_port": f"Thunderbolt {n}", "device": dev,
                           "rdma_device": f"rdma_{dev}" if on else None, "rdma_state": None,
                           "domain_uuid": port_uuid(host, n), "speed_gbps": 120 if m.tb_generation >= 5 else 40,
                           "speed_is_max": True, "connected": False, "peers": [], "devices": []}
                          for n, dev in m.thunderbolt_devices],
                "bridge": {"device": "bridge0", "active": False, "members": [], "service_enabled": False},
                "rdma_enabled": on, "rdma_devices": [f"rdma_{d}" for _, d in m.thunderbolt_devices] if on else []}

    def port(self, end):
        host, n = end.split(":")
        return host, self.tb[host]["ports"][int(n) - 1]

    def cable(self, a, b):
        (ha, pa), (hb, pb) = self.port(a), self.port(b)
        speed = link_speed(MODELS[self.models[ha]].tb_generation, MODELS[self.models[hb]].tb_generation)
        for (h, p), (oh, op) in (((ha, pa), (hb, pb)), ((hb, pb), (ha, pa))):
            m = MODELS[self.models[oh]]
            p.update(connected=True, speed_gbps=speed, speed_is_max=False,
                     peers=[{"domain_uuid": op["domain_uuid"], "model": m.model_id, "name": m.model_name, "direct": True}])
        # PORT_ACTIVE needs RDMA on both ends (as on a Mac, and as macsim does)
        for (h, p), (oh, _) in (((ha, pa), (hb, pb)), ((hb, pb), (ha, pa))):
            if p["rdma_device"]:
                p["rdma_state"] = "PORT_ACTIVE" if self.tb[oh]["rdma_enabled"] else "PORT_DOWN"
        return self

    def mesh(self):
        hosts = list(self.models)
        used = {h: 0 for h in hosts}
        for i, a in enumerate(hosts):
            for b in hosts[i + 1:]:
                used[a] += 1
                used[b] += 1
                self.cable(f"{a}:{used[a]}", f"{b}:{used[b]}")
        return self

    def assess(self, **kwargs):
        return rdma.assess(self.macos, self.tb, models=self.models, **kwargs)


def minis(n=4, **kwargs):
    """n M4 Pro Mac minis, mini-1..mini-n, not yet cabled."""
    return ReadinessCluster({f"mini-{i}": "mini-m4-pro" for i in range(1, n + 1)}, **kwargs)


# --- a Mac that passes the preflight, as macos_facts returns it ---------------------------------------

GOOD = {
    "product_version": "26.2", "build_version": "25C56", "model_identifier": "Mac16,11", "model_name": "Mac mini",
    "chip": "Apple M4 Pro", "apple_silicon": True, "user": "admin", "sudo": "passwordless",
    "management_address": "10.0.1.21", "memory_mb": 65536, "serial_number": "H7X2K4QW9Y",
}


# --- the fabric's network plan, as the plan stage hands it on --------------------------------------------


def planned(cluster: Cluster) -> dict:
    """The network plan as the fabric action hands it to thunderbolt_network."""
    return {host: [{"device": p.device, "hardware_port": p.hardware_port, "address": p.address,
                    "prefix": p.prefix, "peer": p.peer_address} for p in ports]
            for host, ports in cluster.fabric().network.items()}


HOSTS = ["mini-1", "mini-2", "mini-3"]  # of Cluster.of("mini-m4-pro", 3)


def plan(cluster: Cluster) -> dict:
    """The plan stage's result as the write stage gets it (cables and network)."""
    links = cluster.fabric().links
    return {"cables": cable_speeds(links), "cable_ends": cable_ends(links), "network": planned(cluster)}


# --- a converged 4-Mac ring as the audit reads it ----------------------------------------------------------

INVENTORY = "inv/hosts.yml"
LOCK = {
    "format": 1,
    "declaration": {"python_version": "3.12", "uv_version": "0.13.9", "mlx_version": "0.32.4",
                    "mlx_lm_version": "0.32.2", "extra_packages": [],
                    "platforms": ["linux-x86_64", "macos-arm64"]},
    "python_versions": ["3.11", "3.12"],
    "packages": [
        {"name": "mlx", "version": "0.32.4", "marker": "", "files": []},
        {"name": "mlx-lm", "version": "0.32.2", "marker": "", "files": []},
        {"name": "mlx-metal", "version": "0.32.4", "marker": "sys_platform == 'darwin'", "files": []},
        {"name": "mlx-cpu", "version": "0.32.4", "marker": "sys_platform == 'linux'", "files": []},
    ],
    "python_builds": [{"key": "cpython-3.12.12-macos-aarch64-none", "version": "3.12.12", "os": "macos",
                       "arch": "aarch64", "libc": "none", "filename": "x.tar.gz", "sha256": "0" * 64, "url": "u"}],
}
MARKERS = {"sys_platform": "darwin", "platform_machine": "arm64", "python_version": "3.12",
           "python_full_version": "3.12.12", "implementation_name": "cpython", "os_name": "posix"}
POWER = {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1}
HOSTFILE = json.dumps({"backend": "jaccl-ring", "envs": [], "hosts": []})
SHA = hashlib.sha256(HOSTFILE.encode()).hexdigest()
RING = "5E6F7A"


def converged():
    """(hosts, observed, declared, controller) of a converged ring of four M4 Pro Mac minis."""
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    fabric = cluster.fabric()
    hosts = list(cluster.models)
    observed, declared = {}, {}
    for i, host in enumerate(hosts):
        tb = cluster.facts[host]
        for port in tb["ports"]:
            port["rdma_state"] = "PORT_ACTIVE" if port["connected"] else "PORT_DOWN"
        addresses = {p.device: [f"{p.address}/{p.prefix}"] for p in fabric.network[host]}
        observed[host] = {
            "mlx_fleet_macos": {"product_version": "26.2", "build_version": "25C56", "model_identifier": "Mac16,11",
                                "model_name": "Mac mini", "chip": "Apple M4 Pro", "memory_bytes": 64 << 30,
                                "serial_number": f"SERIAL000{i}"},
            "mlx_fleet_thunderbolt": tb,
            "mlx_fleet_node": {
                "pmset": {"AC Power": dict(POWER, displaysleep=10)},
                "names": {"ComputerName": host, "LocalHostName": host},
                "addresses": {p["device"]: addresses.get(p["device"], []) for p in tb["ports"]},
                "wired_limit": {"now_mb": 16384, "daemon": {
                    "path": "/Library/LaunchDaemons/org.mlx-fleet.wired-limit.plist", "present": True,
                    "value_mb": 16384, "loaded": True, "state": "not running"}},
                "environment": {
                    "path": "/opt/mlx-fleet/venv", "exists": True, "error": "",
                    "python": {"version": "3.12.12", "executable": "/opt/mlx-fleet/venv/bin/python",
                               "prefix": "/opt/mlx-fleet/venv", "sys_platform": "darwin", "machine": "arm64",
                               "home": "/opt/mlx-fleet/store/python/cpython-3.12.12-macos-aarch64-none/python/bin",
                               "markers": MARKERS},
                    "installed": {"mlx": "0.32.4", "mlx-lm": "0.32.2", "mlx-metal": "0.32.4"},
                    "records": {n: {"files_sha256": n * 4, "checked": 9, "modified": [], "missing": [],
                                    "modified_count": 0, "missing_count": 0} for n in ("mlx", "mlx-lm", "mlx-metal")}},
                "hostfiles": {"hostfile.json": SHA, "hostfile-ring.json": RING},
                "automatic_macos_updates": False,
            },
        }
        declared[host] = {
            "model": "mini-m4-pro", "min_macos": "26.2", "backend": "auto", "cables": None,
            "ip_pool": "192.168.0.0/16", "envs": [], "output_dir": "inv/.mlx-fleet", "power_settings": dict(POWER),
            "computer_name": host, "local_host_name": host, "wired_limit_mb": 16384,
            "wired_limit_label": "org.mlx-fleet.wired-limit", "env_path": "/opt/mlx-fleet/venv",
            "env_store": "/opt/mlx-fleet/store", "python_interpreter": "", "lock_file": "lock.json",
            "declaration": dict(LOCK["declaration"]), "hostfile_dir": "/opt/mlx-fleet", "bridge": "disabled",
            "automatic_macos_updates": False}
    ledger = {"format": rdma.LEDGER_FORMAT, "nodes": {
        h: {"last_seen_ready": "2026-11-29T17:51:16Z", "product_version": "26.2", "build_version": "25C56",
            "serial_number": f"SERIAL000{i}"} for i, h in enumerate(hosts)}}
    controller = {"hostfiles": {"hostfile.json": SHA, "hostfile-ring.json": RING}, "model": fabric.model,
                  "rdma_ledger": ledger, "lock": (LOCK, None)}
    return hosts, observed, declared, controller


def audit(state):
    """The audit of a state as converged() gives it (or changed), as the CLI runs it."""
    return run_audit(*state[:3], state[3], inventory=INVENTORY, cli=True)


def lines(state):
    """The audit's summary lines for a state."""
    return audit_report.summary_lines(audit(state).to_dict("now", INVENTORY))


def node(state, host="mini-2"):
    """What node_state read on one Mac of a state (mlx_fleet_node), to change in place."""
    return state[1][host]["mlx_fleet_node"]


# The fix lines the audit's report gives under a finding.
ENV = "  fix: ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.env"
NODE = "  fix: ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.node"
FABRIC = "  fix: mlx-fleet converge -i inv/hosts.yml (the fabric step configures the Thunderbolt ports)"


# --- a Mac joining a 3-Studio mesh -------------------------------------------------------------------------

MESH = ["studio-1:2 -- studio-2:2", "studio-1:3 -- studio-3:2", "studio-2:3 -- studio-3:3"]


def onboarding_macos(cluster: Cluster, **new) -> dict:
    """mlx_fleet_macos of each Mac of the cluster; new: facts of the last one (the joining Mac) changed."""
    facts = {}
    for i, (host, key) in enumerate(cluster.models.items()):
        model = MODELS[key]
        facts[host] = {"model_name": model.model_name, "model_identifier": model.model_id, "chip": model.chip,
                       "serial_number": f"SERIAL{i}", "product_version": "26.2", "build_version": "25C56",
                       "apple_silicon": True}
    facts[list(facts)[-1]].update(new)
    return facts


def joining(new_model: str = "studio-m3-ultra", cables=MESH, rdma_new=False, **new):
    """(cluster, macos facts) of a 3-Studio mesh and a Mac "new" of new_model not yet cabled (RDMA off
    unless rdma_new); new: facts of the new Mac changed."""
    cluster = Cluster.of("studio-m3-ultra", 3)
    joined = Cluster({**cluster.models, "new": new_model}, no_rdma=() if rdma_new else ("new",))
    joined.facts.update(cluster.facts)
    return joined, onboarding_macos(joined, **new)


def check_node(host: str, facts: dict, host_vars: dict, *, become_password: bool, pool: str | None = None) -> list[str]:
    """The preflight's lines for one Mac, as the summary prints them."""
    return [p.line for p in node_problems(host, facts, host_vars, become_password=become_password, pool=pool)]
