"""From the evidence to the likely cause: which Mac, which rank, which cable (both ends, ports,
addresses), and why: the Mac unreachable, its interpreter, an address, the Thunderbolt Bridge, the
cable, RDMA.

The evidence is what the jobs said (MLX's own messages, which rank failed and how) and what the
Macs' macOS tools say now (``networksetup -listallhardwareports`` for the port's device,
``ifconfig`` for its link status, addresses and bridge membership, ``networksetup
-listnetworkserviceorder`` for the bridge's service, ``rdma_ctl status``, ``ibv_devices`` and
``ibv_devinfo`` for RDMA), made into facts as the modules make them (module_utils.node_facts) and
judged by the product's own checks: a port's address and the bridge by the audit's
(plugin_utils.checks.audit), RDMA by the RDMA step's (plugin_utils.rdma.readiness). Pure: nothing here talks to a Mac.
"""

from __future__ import annotations

from dataclasses import replace

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import audit
from mlx_fleet import explain
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import facts as judges
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.host import role_files
from mlx_fleet.verify.jobs import Job
from mlx_fleet.verify.nodes import Node
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import End, Link
from mlx_fleet.verify.plan import Cluster, ring_cables

CAUSES = ("unreachable", "interpreter", "moved", "no-ipv4", "bridge", "cable", "rdma", "unknown")
# The cause verify.json names for each kind of finding verify makes (plugin_utils.base.findings.KINDS).
CAUSE = {"unreachable": "unreachable", "unstaged": "unreachable", "interpreter": "interpreter", "moved": "moved",
         "end-address": "no-ipv4", "rank-address": "no-ipv4", "bridge-member": "bridge", "link-down": "cable",
         "rdma-path": "rdma", "unexplained": "unknown"}


PLUG_IN = "plug the cable in firmly at both ends, or replace it"


def converge(inventory: str) -> str:
    """The fix command that converges the cluster back: verify is a command of the CLI."""
    return fixes.run_command("site", inventory, cli=True)


def cause(finding: Finding) -> str:
    return CAUSE[finding.kind]


def finding_dict(finding: Finding) -> dict:
    """A finding as verify.json keeps it: its cause, its line, the Macs, the cable (text for a person, and its
    ends), the rank and the evidence."""
    return {"cause": cause(finding), "message": finding.line, "hosts": list(finding.hosts),
            "cable": str(finding.cable) if finding.cable else None,
            "cable_ends": finding.cable.ports if finding.cable else [], "rank": finding.rank,
            "evidence": list(finding.evidence)}


def node_findings(node: Node, python: str, inventory: str) -> list[Finding]:
    """A Mac that cannot take part at all: ssh fails, or the interpreter does not run MLX."""
    if not node.reachable:
        return [Finding("unreachable", (node.host,), node.error, "an answer over ssh",
                        f"check that it is on the network and that `ssh {node.host}` works from here")]
    if node.error:
        return [Finding("unstaged", (node.host,), node.error)]
    if node.python is None:
        return [Finding("interpreter", (node.host,), node.python_error, python,
                        f"install the environment: {converge(inventory)}", evidence=(node.python_error,))]
    return []


def wanted_bridge(bridge: str | None) -> str:
    """mlx_fabric_bridge as the inventory gives it; None: the role's default."""
    return bridge if bridge is not None else role_files("mlx_fabric")[0]["mlx_fabric_bridge"]


def end_findings(link: Link, end: End, node: Node | None, inventory: str,
                 bridge: str | None = None) -> list[Finding]:
    """What the Mac's tools say is wrong with one end of a cable (nothing when it cannot be read): its link
    (ifconfig's status), and the audit's judgements of its address and of the Thunderbolt Bridge."""
    if node is None or not node.reachable:
        return []
    device = node.ports.get(end.receptacle)
    interfaces = node.interfaces
    if device is None or interfaces is None or device not in interfaces:
        return []
    where = f"{end.host} {end.hardware_port} ({device})"
    iface = interfaces[device]
    has = node.addresses(device)
    seen = (f"{end.host}: ifconfig {device}: status: {iface['status']}, inet {', '.join(has) or 'none'}",)
    found = []
    if iface["status"] == "inactive":
        found.append(Finding("link-down", (link.a.host, link.b.host), f"{where} has no link (status: inactive)",
                             "a link", PLUG_IN, (end.port,), link.cable, evidence=seen))
    if not audit.port_address_check(end.host, end.receptacle, device, has, end.interface).ok:
        found.append(Finding("end-address", (end.host,), f"{where} has {', '.join(has) or 'no IPv4 address'}",
                             end.interface, f"converge it back: {converge(inventory)}", (end.port,), link.cable,
                             evidence=seen))
    state = node.bridge
    judged = audit.bridge_check(end.host, state, wanted_bridge(bridge))
    if judged is not None and not judged.ok and device in state["members"]:
        name = state["device"]
        found.append(Finding("bridge-member", (end.host,), f"{where} is a member of {name}", judged.expected,
                             f"turn it off: {converge(inventory)} (the fabric step)", (end.port,), link.cable,
                             evidence=(f"{end.host}: Thunderbolt Bridge: {judged.found} (expected {judged.expected}); "
                                       f"ifconfig {name}: member {device}",)))
    return found


def rewired(cables: list[Link], nodes: dict[str, Node]) -> judges.Rewired:
    """The cables found on the Macs whose ports were read, against the last converge's between them: the
    converge's judgement of a cable moved (judges.rewired)."""
    read = {host: node.cabling for host, node in nodes.items() if node.reachable and node.cabling is not None}
    links, dummy = discover(list(read), read)
    reference = [link.cable for link in cables if {link.a.host, link.b.host} <= read.keys()]
    return judges.rewired(reference, [link.cable for link in links])


def cable_findings(link: Link, nodes: dict[str, Node], inventory: str, bridge: str | None = None, *,
                   moves: judges.Rewired | None = None) -> list[Finding]:
    """What is wrong with a cable: moved to other ports (as the converge says it), else what its ends show."""
    moves = moves or rewired([link], nodes)
    moved = [f for f in moves.findings if f.kind == "moved" and f.cable == link.cable]
    if moved:
        return [replace(f, fix=fixes.fill(f.fix, inventory, cli=True),
                        evidence=(f"Thunderbolt: {f.found} links, {f.expected} does not",)) for f in moved]
    found = [f for end in link.ends() for f in end_findings(link, end, nodes.get(end.host), inventory, bridge)]
    dark = [f for f in found if f.kind == "link-down"]
    if len(dark) == 2:  # no link at either end: one cable to look at, not two findings
        ends = " and ".join(f"{e.host} {e.hardware_port}" for e in link.ends())
        both = replace(dark[0], found=f"no link at either end ({ends}: status: inactive)",
                       ports=link.cable.key, evidence=dark[0].evidence + dark[1].evidence)
        found = [both] + [f for f in found if f.kind != "link-down"]
    return found


def rank_line(job: Job, rank) -> str:
    """rank 1 on vr-2 (rdma_en2): exited with code 1: MLX's message."""
    devices = [d for d in job.hostfile["hosts"][rank.rank].get("rdma") or [] if d]
    where = f"rank {rank.rank} on {rank.host}" + (f" ({', '.join(map(str, devices))})" if devices else "")
    stuck = (job.kind != "script" and rank.started and not rank.ok
             and not any(r["record"] == "init" for r in rank.records))
    return (f"{where}: {rank.outcome()}" + (" in mx.distributed.init" if stuck else "")
            + (f": {rank.error}" if rank.error else ""))


def failure_lines(job: Job) -> list[str]:
    """What failed in a job, rank by rank, with MLX's messages (first the ranks that reported one)."""
    lines = [f"mlx.launch: {line}" for line in job.launcher_errors]
    failed = sorted(job.failed_ranks(), key=lambda r: (r.error is None, r.rank))
    lines += [rank_line(job, rank) for rank in failed]
    if job.killed:
        lines.append(f"stopped by mlx-fleet after {job.seconds:g} s: the ranks did not finish in time")
    return lines


def _rdma_evidence(job: Job, nodes: dict[str, Node]) -> list[str]:
    lines = []
    for host in job.hosts:
        node = nodes.get(host)
        if node is None:
            continue
        enabled = node.parsed("rdma_ctl", "parse_rdma_ctl_status")
        states = node.parsed("ibv_devinfo", "parse_ibv_devinfo")
        wanted = [d for d in job.hostfile["hosts"][job.hosts.index(host)].get("rdma") or [] if isinstance(d, str)]
        if states is None:
            ports = "unread"
        else:
            ports = ", ".join(f"{d} {'/'.join(states[d]['ports'].values()) or 'no port'}" if d in states
                              else f"{d} not listed" for d in wanted)
        lines.append(f"{host}: rdma_ctl status: {'unread' if enabled is None else 'enabled' if enabled else 'disabled'}"
                     f"; ibv_devinfo: {ports}")
    return lines


def readiness(job: Job, cluster: Cluster, nodes: dict[str, Node]) -> dict[str, rdma.Readiness]:
    """The RDMA readiness of the job's Macs as the RDMA step and the audit judge it (rdma.classify_node), from
    what this run read, with the job's cables; a Mac whose RDMA state was not read (or only half) is left out."""
    cabled = rdma.cables_by_host(_job_cables(job, cluster))
    judged = {}
    for host in job.hosts:
        node = nodes.get(host)
        facts = node.thunderbolt if node is not None and node.reachable else None
        if facts is not None:
            judged[host] = rdma.classify_node(host, node.macos, facts, cabled=cabled.get(host, {}))
    return judged


def _rdma_finding(job: Job, cluster: Cluster, nodes: dict[str, Node], inventory: str) -> Finding:
    said = [rank_line(job, r) for r in job.failed_ranks() if r.error]
    judged = readiness(job, cluster, nodes)
    off = [h for h, r in judged.items() if r.status == rdma.NEEDS_RECOVERY]
    unready = [r for r in judged.values() if r.status != rdma.READY]
    if off:
        fix = f"RDMA is off on {', '.join(off)}: {fixes.run_command('checklist', inventory, cli=True)}"
    elif unready:
        fix = "; ".join(r.message for r in unready)
    else:
        fix = ("RDMA is not reported off, yet MLX cannot use it; meanwhile the TCP ring works: "
               f"mlx.launch --hostfile {cluster.folder / RING_HOSTFILE}")
    return Finding("rdma-path", tuple(job.hosts), said[0] if said else "no rank said why", "the RDMA path works", fix,
                   cable=job.cable, rank=job.failed_ranks()[0].rank if job.failed_ranks() else None,
                   evidence=tuple(failure_lines(job) + _rdma_evidence(job, nodes)))



def _job_cables(job: Job, cluster: Cluster) -> list[Link]:
    if job.cable:
        return [link for link in cluster.cables if link.cable == job.cable]
    if job.backend == "ring":
        return ring_cables(cluster, job.hostfile)
    return [link for link in cluster.cables if link.a.host in job.hosts and link.b.host in job.hosts]


def diagnose(jobs: list[Job], cluster: Cluster, nodes: dict[str, Node], inventory: str,
             bridge: str | None = None) -> list[Finding]:
    """The likely causes of the failed jobs. A failed RDMA job whose TCP twin (the same ranks or
    cable over the ring hostfile) passed, on cables that look right, is an RDMA problem."""
    tcp_works = {(j.kind, j.cable) for j in jobs if j.passed and j.backend == "ring"}
    moves = rewired(cluster.cables, nodes)
    found: list[Finding] = []
    for job in jobs:
        if job.passed or job.kind == "script":
            continue
        causes = [f for link in _job_cables(job, cluster)
                  for f in cable_findings(link, nodes, inventory, bridge, moves=moves)]
        messages = [(r, r.error) for r in job.failed_ranks() if r.error]
        for rank, message in messages:
            # The knowledge base `mlx-fleet explain` uses: a rank that cannot bind its own address.
            if job.backend == "ring" and explain.causes_of(message)[:1] == ["no-ipv4"] and not any(
                    cause(f) == "no-ipv4" and rank.host in f.hosts for f in causes):
                ips = ", ".join(job.hostfile["hosts"][rank.rank]["ips"])
                causes.append(Finding("rank-address", (rank.host,), message, ips,
                                      f"converge it back: {converge(inventory)}", rank=rank.rank, evidence=(message,)))
        first = messages[0] if messages else None
        if not causes and job.backend != "ring" and (job.kind, job.cable) in tcp_works:
            causes.append(_rdma_finding(job, cluster, nodes, inventory))
        elif not causes:
            said = explain.explain("\n".join(m for _, m in messages)) if messages else None
            reading = f"; MLX's message says {said.first_line} (mlx-fleet explain)" if said and said.causes else ""
            causes.append(Finding("unexplained", tuple(job.hosts), "; ".join(failure_lines(job)[:2]) + reading,
                                  cable=job.cable, rank=first[0].rank if first else None,
                                  evidence=tuple(failure_lines(job))))
        found += causes
    return _merge_rdma(_unique(found))


def _merge_rdma(findings: list[Finding]) -> list[Finding]:
    """One RDMA finding: the first (all ranks when the all_sum failed), naming the other cables it holds for."""
    rdma = [f for f in findings if f.kind == "rdma-path"]
    if len(rdma) < 2:
        return findings
    first, others = rdma[0], [f.cable for f in rdma[1:] if f.cable]
    merged = replace(first, found=first.found + "; the same on cable" + ("s " if len(others) > 1 else " ")
                     + ", ".join(map(str, others)), hosts=tuple(dict.fromkeys(h for f in rdma for h in f.hosts)),
                     evidence=tuple(dict.fromkeys(line for f in rdma for line in f.evidence)))
    return [merged if f is first else f for f in findings if f.kind != "rdma-path" or f is first]


def _unique(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))
