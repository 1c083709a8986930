"""The check before `mlx-fleet run` launches a job (docs/jobs-ps-stop.md, "Before launching"): one finding for
each reason not to start, and nothing started on any Mac.

On the controller: the hold of an unfinished macOS update (checks.os_update), and the published hostfile
(OUTPUT_DIR/hostfile.json) against what the last converge published and its cluster model (cluster.json). On the
Macs, one ssh session each, all at once: the watch's probe (mlx_fleet.watch: reachable, the cables, RDMA; only
the reads those need), the process list (mlx_fleet.jobs), the Mac's copy of the hostfile and its hold marker, the size of each declared
model the command names, and what the run record needs besides (the hardware, and the environment's
distributions with their RECORD digests), so the record is made from this same round (mlx_fleet.run.facts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HELD, HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import PROBE
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.model_files import model_root
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import (
    DEFAULT_HF_CACHE, DEFAULT_MODELS_DIR, ModelDeclaration, ModelDeclarationError, parse_models)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import RDMA_BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.hostfile import Hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.facts import FIX_RECOVERY
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.status import MODEL_MISSING, model_fact
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, load_models_lock, models_lock_path)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.outputs import current_files
from mlx_fleet import jobs, watch
from mlx_fleet.errors import UserError
from mlx_fleet.verify import nodes
from mlx_fleet.verify.plan import InventoryHost, Settings, VerifyError, read_inventory
from mlx_fleet.watch_cli import read_records

# What the watch finds that stops a job: a Mac it cannot reach, a cable out or moved, a port without its address,
# RDMA wedged. RDMA off is judged here, for the backend the job uses.
WATCH_KINDS = ("unreachable", "cable", "moved", "no-ipv4", "stale-rdma")
CONNECT_TIMEOUT = 5
RDMA_TIMEOUT = 5  # seconds ibv_devinfo may take (the watch's default)
HOSTFILE_READ, HELD_READ = "hostfile", "held"
_MODEL_READ = "model-"  # + the model's name: `du -sk` of its folder
ENVIRONMENT_READ = "environment"  # the environment's Python: its distributions and their RECORD digests
# Of the watch's probe, only what WATCH_KINDS are judged on (the ports, cables and RDMA: node_facts.thunderbolt);
# then sw_vers, sysctl and the hardware: the record's macOS, memory, chip, serial and wired limit (node_facts.macos).
CHECK_READS = tuple(dict.fromkeys(node_facts.THUNDERBOLT_READS + ("sw_vers", "sysctl", "hardware")))


@dataclass
class Check:
    """What the check found against a launch, and the reads it made (for the run record)."""

    findings: list[Finding]
    hosts: list[str] = field(default_factory=list)  # the inventory's Macs, in its order
    reads: dict[str, dict] = field(default_factory=dict)  # host -> its reads (name -> (exit status, stdout))
    models: dict[str, str] = field(default_factory=dict)  # host -> mlx_fleet_model
    env_path: str = ""
    declares_models: bool = False  # the inventory declares models (mlx_fleet_models)


# The inventory's variables the check reads for every Mac (read_cluster).
INVENTORY_NAMES = ("mlx_fleet_model", "mlx_fabric_hostfile_dir", "mlx_fleet_models", "mlx_fleet_models_hf_cache",
                   "mlx_fleet_models_dir", "mlx_env_lock_file")


def read_cluster(inventory: str) -> tuple[Settings, list[InventoryHost]]:
    """The inventory's one read for a run: its settings and every Mac with the variables the check needs."""
    try:
        return read_inventory([inventory], INVENTORY_NAMES)
    except VerifyError as exc:
        raise UserError(str(exc)) from None


def before_launch(inventory: str, backend: str, command: list[str],
                  cluster: tuple[Settings, list[InventoryHost]] | None = None) -> Check:
    """Every reason not to launch COMMAND on the cluster of INVENTORY (CLUSTER: its read_cluster, read here when
    not given) with BACKEND (auto: the hostfile's), none when it may start, and the reads. Reads only."""
    settings, hosts = cluster or read_cluster(inventory)
    values = hosts[0].values
    output_dir = settings.output_dir
    try:
        declared = parse_models(values["mlx_fleet_models"])
        models = named_models(declared, command)
    except ModelDeclarationError as exc:
        raise UserError(str(exc)) from None
    found = held_on_controller(output_dir)
    hostfile, hostfile_findings = published_hostfile(output_dir, [h.name for h in hosts])
    found += hostfile_findings
    backend = (hostfile or {}).get("backend") if backend == "auto" else backend

    env_path = str(Path(settings.python).parent.parent)
    remote = values["mlx_fabric_hostfile_dir"] or "/opt/mlx-fleet"
    roots = {m.name: model_folder(m, values["mlx_fleet_models_hf_cache"] or DEFAULT_HF_CACHE,
                                  values["mlx_fleet_models_dir"] or DEFAULT_MODELS_DIR) for m in models}
    baseline = watch.Baseline([h.name for h in hosts], models={h.name: h.values["mlx_fleet_model"] for h in hosts},
                              bridge=settings.bridge, inventory=inventory)
    try:
        read_records(baseline, output_dir)
    except UserError:
        pass  # a damaged record: published_hostfile said so; the cables are then not compared
    script = nodes.read_script(
        CHECK_READS, None, bounded=watch.BOUNDED_READS, limit=RDMA_TIMEOUT,
        files={HOSTFILE_READ: f"{remote}/{HOSTFILE}", HELD_READ: f"{remote}/{HELD}"},
        commands={**jobs.READ, ENVIRONMENT_READ: [f"{env_path}/bin/python", "-I", "-B", "-c", PROBE, "installed",
                                                  "digests"],
                  **{_MODEL_READ + name: ["du", "-sk", root] for name, root in roots.items()}}, first=tuple(jobs.READ))
    probed = nodes.probe([h.ssh for h in hosts], script, CONNECT_TIMEOUT, CONNECT_TIMEOUT + RDMA_TIMEOUT + 30)
    macs = {host: watch.observe(node.reads, env_path) if node.reachable and node.reads
            else watch.unreachable(node.error or "no output") for host, node in probed.items()}
    found += [f for f in watch.assess(baseline, macs).values() if f.kind in WATCH_KINDS]
    for host, node in probed.items():
        if not macs[host]["up"]:
            continue
        found += on_mac(host, node.reads, macs[host], hostfile, backend, env_path, pinned_sizes(models, values))
    return Check([replace(f, fix=fixes.fill(f.fix, inventory, cli=True)) for f in found], [h.name for h in hosts],
                 {host: node.reads for host, node in probed.items()}, baseline.models, env_path, bool(declared))


def named_models(declared: tuple[ModelDeclaration, ...], command: list[str]) -> list[ModelDeclaration]:
    """The declared models whose name or repo is a word of COMMAND (or an option's value: --model=REPO)."""
    words = {part for word in command for part in (word, word.partition("=")[2]) if part}
    return [m for m in declared if m.name in words or (m.repo and m.repo in words)]


def pinned_sizes(models: list[ModelDeclaration], values: dict) -> dict[str, int | None]:
    """Each named model's bytes as its lock pins them (the models' lock beside the environment's), None when it
    is not pinned (then only its presence is checked)."""
    try:
        locked = load_models_lock(models_lock_path(values["mlx_env_lock_file"])) if values["mlx_env_lock_file"] else {}
    except ModelsLockError:
        locked = {}
    return {m.name: locked[m.name].total_bytes if m.name in locked else None for m in models}


def model_folder(model: ModelDeclaration, hf_cache: str, models_dir: str) -> str:
    """Where a Mac keeps the model's files (a Hub model: its blobs, which its snapshots link to)."""
    if model.is_hub:
        return model_root({"source": "hub", "repo": model.repo, "repo_type": model.repo_type}, hf_cache, models_dir) + "/blobs"
    return model_root({"source": "path", "name": model.name}, hf_cache, models_dir)


def held_on_controller(output_dir: Path) -> list[Finding]:
    line = os_update.hold_line(output_dir)
    return [Finding("update-held", found=line.removeprefix("held: "), fix="mlx-fleet os-update -i {inventory}")] if line else []


def published_hostfile(output_dir: Path, inventory_hosts: list[str]) -> tuple[dict | None, list[Finding]]:
    """The controller's hostfile.json (None when there is none to read), and what is wrong with it: missing, not
    mlx.launch's format, changed since the last converge published it, or unlike the cluster model (backend, Macs,
    addresses, RDMA devices) or the inventory (its Macs)."""
    path = output_dir / HOSTFILE

    def stale(found: str) -> Finding:
        return Finding("hostfile-stale", found=found, fix="{hostfile}")

    try:
        data = load_json(path.read_text())
        Hostfile.from_json(data)
    except FileNotFoundError:
        return None, [stale(f"is missing in {output_dir}")]
    except (OSError, ValueError) as exc:
        return None, [stale(f"in {output_dir} is not a hostfile mlx.launch reads ({str(exc)[:120]})")]
    published = current_files(output_dir)
    problems = []
    if (output_dir / ".current").is_dir() and HOSTFILE not in published:
        problems.append(f"in {output_dir} was replaced after the last converge published it")
    try:
        model = read_model(output_dir)
    except ValueError as exc:
        model, problems = None, problems + [f"has a damaged cluster model beside it ({str(exc)[:120]})"]
    if model is not None:
        problems += unlike_model(data, model)
    listed = [h["ssh"] for h in data["hosts"]]
    if sorted(listed) != sorted(inventory_hosts):
        problems.append(f"lists {', '.join(listed)} where the inventory has {', '.join(inventory_hosts)}")
    return data, [stale(problem) for problem in problems]


def unlike_model(hostfile: dict, model) -> list[str]:
    """Where the hostfile and the cluster model of the same converge disagree."""
    problems = []
    if model.backend and hostfile["backend"] != model.backend:
        problems.append(f"says backend {hostfile['backend']} where the cluster model says {model.backend}")
    ends = {}
    for link in model.links:
        for end in link.ends():
            ends.setdefault(end.host, []).append(end)
    hosts = [h["ssh"] for h in hostfile["hosts"]]
    for rank, host in enumerate(hostfile["hosts"]):
        mine = ends.get(host["ssh"], [])
        if hostfile["backend"] == "ring":
            gone = [ip for ip in host["ips"] if ip not in {end.address for end in mine}]
            if gone:
                problems.append(f"gives rank {rank} ({host['ssh']}) {', '.join(gone)}, which no cable of the cluster "
                                "model has")
            continue
        devices = {f"rdma_{end.device}" for end in mine if end.device}
        for peer, entry in enumerate(host["rdma"]):
            named = [entry] if isinstance(entry, str) else list(entry or [])
            unknown = [d for d in named if d not in devices]
            if unknown:
                problems.append(f"gives rank {rank} ({host['ssh']}) {', '.join(unknown)} towards {hosts[peer]}, "
                                "which no cable of the cluster model has")
    return problems


def on_mac(host: str, reads: dict, mac: dict, hostfile: dict | None, backend: str | None, env_path: str,
           models: dict[str, int | None]) -> list[Finding]:
    """What one Mac's reads say against a launch: its hold marker, its copy of the hostfile, RDMA off for an
    RDMA backend, an MLX job running, a named model (name -> its pinned bytes, or None) missing, empty or smaller
    than pinned."""
    found = []
    rc, text = reads.get(HELD_READ, (1, ""))
    if rc == 0 and text.strip():
        found.append(Finding("update-held", (host,), text.strip().removeprefix("held: ")[:300],
                             fix="mlx-fleet os-update -i {inventory}"))
    rc, text = reads.get(HOSTFILE_READ, (1, ""))
    if hostfile is not None:
        try:
            same = rc == 0 and json.loads(text) == hostfile
        except ValueError:
            same = False
        if not same:
            found.append(Finding("hostfile-stale", (host,), "is missing on the Mac" if rc != 0 else
                                 "on the Mac differs from the controller's", fix="{hostfile}"))
    if backend in RDMA_BACKENDS and mac.get("rdma_enabled") is False:
        found.append(Finding("rdma-off", (host,), "disabled", f"the {backend} backend needs it", fix=FIX_RECOVERY))
    found += jobs.running(host, jobs.jobs_in(host, reads, env_path).jobs)
    for name, pinned in models.items():
        rc, text = reads.get(_MODEL_READ + name, (1, ""))
        words = text.split()
        kib = int(words[0]) if rc == 0 and words and words[0].isdigit() else 0
        short = "missing" if rc != 0 else "empty" if kib == 0 else (
            f"incomplete ({jobs.size(kib)} of {jobs.size(pinned // 1024)})" if pinned and kib * 1024 < pinned else "")
        if short:
            found.append(Finding(MODEL_MISSING, (host,), short, f"{jobs.size(pinned // 1024)} as pinned" if pinned
                                 else "present", fix="{models}", fact=model_fact(name)))
    return found
