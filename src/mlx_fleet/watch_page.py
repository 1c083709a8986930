"""The watch's outputs (docs/watch.md): status.json (mlx-fleet-watch/1), metrics.prom (Prometheus text
format for node_exporter's textfile collector) and status.html (self-contained: the fabric's picture with
what is broken in red, and a table per Mac). Each is written atomically, so a reader never sees half."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import picture as fabric_picture
from mlx_fleet import watch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import printable, template_environment
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import Link
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json, atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.state import ACTIVE

STATUS_FILE = "status.json"
METRICS_FILE = "metrics.prom"
HTML_FILE = "status.html"

_METRICS = (
    ("mlx_fleet_mac_up", "1 when the Mac answered the watch's last probe over ssh"),
    ("mlx_fleet_link_up", "1 when both ends of the cable see each other (cables of the last converge, and any found)"),
    ("mlx_fleet_link_speed_gbps", "the cable's link speed in Gb/s (0 when it is out)"),
    ("mlx_fleet_rdma_port_active", "1 when the RDMA port of the Thunderbolt port is PORT_ACTIVE"),
    ("mlx_fleet_findings", "what is wrong now (the watch's findings)"),
    ("mlx_fleet_watch_last_round_timestamp_seconds", "when the last round ended, in seconds since the epoch"),
)


def _label(value: str) -> str:
    # The text format escapes backslash, quote and newline; the other control characters a Mac's names may
    # carry are written as their escapes first (printable), so the file is safe to show in a terminal too.
    return '"' + printable(str(value)).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _labels(**labels) -> str:
    return "{" + ",".join(f"{k}={_label(v)}" for k, v in labels.items()) + "}"


def cables(baseline: watch.Baseline, links: list[Link]) -> dict[str, Link | None]:
    """Every cable to show, by its name: the last converge's, linked or not, and any other found."""
    found = {link.cable.key: link for link in links}
    named = {last.cable.key: str(last.cable) for last in baseline.cables} | {key: str(link) for key, link in found.items()}
    return {name: found.get(key) for key, name in sorted(named.items(), key=lambda item: item[1])}


def metrics(baseline: watch.Baseline, macs: dict[str, dict], links: list[Link], findings: dict, now: float) -> str:
    samples: dict[str, list[str]] = {name: [] for name, text in _METRICS}
    for host in baseline.hosts:
        mac = macs.get(host, {})
        samples["mlx_fleet_mac_up"].append(f"{_labels(mac=host)} {1 if mac.get('up') else 0}")
        for port in mac.get("ports", []) if mac.get("up") else []:
            if port.get("rdma_device"):
                active = 1 if port.get("rdma_state") == ACTIVE else 0
                samples["mlx_fleet_rdma_port_active"].append(
                    f"{_labels(mac=host, port=port['receptacle'], device=port['rdma_device'])} {active}")
    for cable, link in cables(baseline, links).items():
        samples["mlx_fleet_link_up"].append(f"{_labels(cable=cable)} {1 if link else 0}")
        samples["mlx_fleet_link_speed_gbps"].append(f"{_labels(cable=cable)} {link.speed_gbps if link else 0:g}")
    samples["mlx_fleet_findings"].append(f" {len(findings)}")
    samples["mlx_fleet_watch_last_round_timestamp_seconds"].append(f" {now:.3f}")
    lines = []
    for name, text in _METRICS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        lines += [name + sample for sample in samples[name]]
    return "\n".join(lines) + "\n"


def picture(baseline: watch.Baseline, links: list[Link], findings: dict[watch.Key, Finding], title: str) -> str:
    """The fabric in DOT (fabric_picture): cables found, the last converge's cables that are out as red
    dashed lines, slow cables and Macs down in red."""
    drawn = []
    for finding in findings.values():
        if finding.kind == "cable":
            first, second = finding.ports
            drawn.append(replace(finding, hosts=(), gap=(first.host, second.host),
                                 note=f"OUT: TB{first.receptacle} -- TB{second.receptacle}"))
        elif finding.cable and finding.kind in ("slow", "extra", "moved", "no-ipv4", "rdma-port", "rdma-gid"):
            drawn.append(replace(finding, hosts=(), link=finding.cable, note=finding.kind))
        if finding.kind in ("unreachable", "bridge", "stale-rdma", "rdma-off"):
            drawn.append(finding)
    addresses = {last.cable: last.network for last in baseline.cables}
    return fabric_picture.dot(baseline.hosts, baseline.models, links, addresses, title, drawn)


def render_html(status: dict, svg: str | None, why: str, every: float | None) -> str:
    return template_environment(Path(__file__).parent / "templates").get_template("status.html.j2").render(
        status=printable(status), svg=svg[svg.index("<svg"):] if svg else None, why=why,
        refresh=int(every) if every else None)


def status(baseline: watch.Baseline, macs: dict[str, dict], links: list[Link], findings: dict[watch.Key, Finding],
           events: list[dict], *, generated: str, round_number: int, last_good: dict) -> dict:
    return {
        "format": watch.FORMAT,
        "generated": generated,
        "round": round_number,
        "inventory": baseline.inventory,
        "macs": {host: macs.get(host, watch.unreachable("not probed")) for host in baseline.hosts},
        "cables": {cable: ({"up": True, "speed_gbps": link.speed_gbps} if link else {"up": False})
                   for cable, link in cables(baseline, links).items()},
        "findings": watch.findings_data(findings),
        "events": events,
        "last_good": last_good,
    }


def read_status(path: Path) -> tuple[int, dict[str, dict], list[str]]:
    """The round and last_good of an earlier watch's status.json (0 and {} without one), and what of it was left
    out: a file that is not JSON or not mlx-fleet-watch/1, a round that is no count, a Mac's record or field of
    another shape (watch.earlier). Never an error: this round's files replace it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return 0, {}, []
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not UTF-8, not JSON, nested too deep
        return 0, {}, [f"{path}: not read ({str(exc)[:100]}); this round starts afresh"]
    if not isinstance(data, dict) or data.get("format") != watch.FORMAT:
        return 0, {}, [f"{path}: not a {watch.FORMAT} status; this round starts afresh"]
    number = data.get("round", 0)
    left_out = [] if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else ["round"]
    last_good, more = watch.earlier(data.get("last_good", {}))
    left_out += more
    if not left_out:
        return number, last_good, []
    shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
    return (0 if "round" in left_out else number), last_good, [
        f"{path}: left out what the watch does not write so: {shown}"]


def write(directory: Path, baseline: watch.Baseline, status_data: dict, links: list[Link],
          findings: dict[watch.Key, Finding], now: float, every: float | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / STATUS_FILE, status_data)
    atomic_write_text(directory / METRICS_FILE, metrics(baseline, status_data["macs"], links, findings, now))
    title = (f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "all well") + \
        f" · {status_data['generated']}"
    svg, why = fabric_picture.svg(picture(baseline, links, findings, title))
    atomic_write_text(directory / HTML_FILE, render_html(status_data, svg, why, every))
