"""The report of a verify run: verify.json (schema ``mlx-fleet-verify/1``, docs/verify.md), and from it
verify.html (the printed look of the Recovery checklist, with a bandwidth plot drawn by matplotlib),
the terminal summary and the exit status. Everything shown is read from the JSON, so the three
always say the same thing."""

from __future__ import annotations

import getpass
import hashlib
import io
import json
import platform
import socket
import statistics
from importlib import metadata
from pathlib import Path

import jinja2

from mlx_fleet import __version__
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE
from mlx_fleet.verify import compare
from mlx_fleet.verify.diagnose import CAUSES, failure_lines, finding_dict
from mlx_fleet.verify.jobs import Job
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import TEMPLATES as RECOVERY_TEMPLATES
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet.verify.plan import format_size
from mlx_fleet.verify.run import FAILED, PASSED, UNREACHABLE, Outcome

SCHEMA = "mlx-fleet-verify/1"
EXIT = {PASSED: 0, FAILED: 1, UNREACHABLE: 4}
JSON_FILE, HTML_FILE, PLOT_FILE, LOG_DIR = "verify.json", "verify.html", "bandwidth.svg", "logs"
# The report's own template ships with this package; the printed look (sheet.css) is the collection's.
TEMPLATES = [Path(__file__).parent / "templates", RECOVERY_TEMPLATES]


# --- the level's reasons -----------------------------------------------------------------------------


_REASONS = {
    "check-failed": "the cluster check failed: not even a small task completes on every rank",
    "checks-ran": "the check program completed on every rank and every cable, each rank's log kept",
    "needs-script": "reproduces needs your own task: --script FILE --repeat K",
    "incomplete": "{run} did not complete: {problem}",
    "no-result": "{run} printed no JSON result (numbers or arrays) on any rank",
    "no-baseline": "the single-Mac run printed no JSON result: nothing to compare with",
    "needs-repeat": "reproduces needs repeated runs: --repeat 2 or more",
    "agree": "{cluster_runs} cluster runs and {single_runs} single-Mac runs agree ({comparisons} comparisons)",
}


def reason_line(reason: compare.Reason) -> str:
    """A reason for the level, as the report and the terminal say it."""
    if reason.kind == "disagree":
        c = reason.comparison
        return f"{c.what}: {c.difference.message}" + (
            f" ({c.difference.count} elements out of tolerance)" if c.difference.count > 1 else "")
    return _REASONS[reason.kind].format(run=reason.run, problem=reason.problem, cluster_runs=reason.cluster_runs,
                                        single_runs=reason.single_runs, comparisons=reason.comparisons)


# --- figures ----------------------------------------------------------------------------------------


def _records(job: Job, kind: str) -> dict[int, list[dict]]:
    by_size: dict[int, list[dict]] = {}
    for rank in job.ranks:
        for record in rank.records:
            if record["record"] == kind:
                by_size.setdefault(record["size"], []).append(dict(record, host=rank.host))
    return by_size


def _mismatches(records: list[dict]) -> list[dict]:
    return [{k: r[k] for k in ("rank", "host", "bad", "first_bad", "got", "want")} for r in records if r["bad"]]


def all_sum_figures(job: Job) -> list[dict]:
    """Per size: the slowest rank's median time; algorithm bandwidth (bytes / time) and bus bandwidth
    (x 2(n-1)/n, what each link carries in a ring all-reduce)."""
    n = len(job.ranks)
    rows = []
    for size, records in sorted(_records(job, "all_sum").items()):
        seconds = max(statistics.median(r["seconds"]) for r in records)
        rows.append({"bytes": size, "repetitions": min(len(r["seconds"]) for r in records),
                     "seconds": seconds, "algorithm_bytes_per_s": size / seconds,
                     "bus_bytes_per_s": size / seconds * 2 * (n - 1) / n,
                     "correct": len(records) == n and not any(r["bad"] for r in records),
                     "mismatches": _mismatches(records)})
    return rows


def link_figures(job: Job) -> list[dict]:
    """Per size: one way = half the median round trip measured on the first end; bandwidth = bytes / one way."""
    rows = []
    for size, records in sorted(_records(job, "link").items()):
        timed = [r for r in records if r["rank"] == 0]
        if not timed:
            continue
        one_way = statistics.median(timed[0]["round_trip_seconds"]) / 2
        rows.append({"bytes": size, "repetitions": len(timed[0]["round_trip_seconds"]), "one_way_seconds": one_way,
                     "bytes_per_s": size / one_way, "correct": len(records) == 2 and not any(r["bad"] for r in records),
                     "mismatches": _mismatches(records)})
    return rows


# --- the JSON ---------------------------------------------------------------------------------------


def _job_entry(job: Job, out: Path) -> dict:
    entry = {
        "name": job.title, "kind": job.kind, "backend": job.backend, "cable": job.cable and str(job.cable),
        "status": PASSED if job.passed else FAILED, "seconds": job.seconds, "stopped_at_deadline": job.killed,
        "hosts": job.hosts, "failures": failure_lines(job), "leftovers": job.leftovers,
        "logs": str(job.log_dir.relative_to(out)),
        "ranks": [{"rank": r.rank, "host": r.host, "outcome": r.outcome(), "error": r.error,
                   "log": str((job.log_dir / f"rank-{r.rank}-{r.host}.log").relative_to(out))} for r in job.ranks],
    }
    if job.kind == "all_sum":
        entry["figures"] = all_sum_figures(job)
    elif job.kind == "link":
        figures = link_figures(job)
        entry["figures"] = figures
        entry["latency_seconds"] = figures[0]["one_way_seconds"] if figures else None
        entry["peak_bytes_per_s"] = max((f["bytes_per_s"] for f in figures), default=None)
    return entry


def _rdma(outcome: Outcome) -> dict | None:
    if not outcome.cluster.rdma:
        return None
    checks = outcome.checks()

    def state(backend_is_rdma: bool) -> str:
        ran = [j for j in checks if (j.backend != "ring") == backend_is_rdma]
        return "not run" if not ran else "works" if all(j.passed for j in ran) else "failed"

    rdma, tcp = state(True), state(False)
    if rdma == "works":
        statement = "RDMA path works"
    else:
        statement = f"RDMA path {rdma}, TCP path {'works' if tcp == 'works' else tcp if tcp == 'failed' else 'not checked'}"
    return {"rdma": rdma, "tcp": tcp, "statement": statement}


def _links(outcome: Outcome, entries: list[dict]) -> list[dict]:
    """Every cable with both ends; its status is its check over the hostfile's backend, and the
    figures those of its last check that passed (the TCP one when RDMA failed)."""
    links = []
    for link in outcome.cluster.cables:
        ends = []
        for end in link.ends():
            node = outcome.nodes.get(end.host)
            ends.append({"host": end.host, "port": end.receptacle, "hardware_port": end.hardware_port,
                         "device": node.ports.get(end.receptacle) if node else None,
                         "address": end.interface})
        # entries are the checks' entries, in outcome.checks() order
        checks = [e for job, e in zip(outcome.checks(), entries) if job.kind == "link" and job.cable == link.cable]
        measured = next((e for e in reversed(checks) if e["status"] == PASSED), None)
        links.append({"cable": str(link.cable), "ends": ends, "status": checks[0]["status"] if checks else "not run",
                      "checks": [{"name": e["name"], "backend": e["backend"], "status": e["status"]} for e in checks],
                      "measured_with": measured["backend"] if measured else None,
                      "latency_seconds": measured["latency_seconds"] if measured else None,
                      "peak_bytes_per_s": measured["peak_bytes_per_s"] if measured else None})
    return links


def _ranks(outcome: Outcome) -> list[dict]:
    ranks = []
    for rank, entry in enumerate(outcome.cluster.hostfile["hosts"]):
        node = outcome.nodes.get(entry["ssh"])
        macos = node.macos if node else {}
        ranks.append({"rank": rank, "host": entry["ssh"], "ips": entry["ips"], "rdma": entry.get("rdma") or [],
                      "reachable": bool(node and node.reachable),
                      "macos": macos.get("product_version"), "build": macos.get("build_version"),
                      "python": node.python if node else None, "mlx": node.mlx if node else None})
    return ranks


def _run_entry(run: compare.Run) -> dict:
    return {"label": run.label, "completed": run.completed, "problem": run.problem,
            "outputs": {str(rank): value for rank, value in sorted(run.outputs.items())}}


def _controller_mlx() -> str | None:
    try:
        return metadata.version("mlx")
    except metadata.PackageNotFoundError:
        return None


def _record(outcome: Outcome, command: list[str]) -> dict:
    hostfile = outcome.cluster.folder / HOSTFILE
    options = outcome.options
    return {
        "tool": "mlx-fleet verify", "mlx_fleet_version": __version__, "run_id": outcome.run_id,
        "command": command,
        "started_at": outcome.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished_at": outcome.finished.strftime("%Y-%m-%dT%H:%M:%SZ") if outcome.finished else None,
        "seconds": round((outcome.finished - outcome.started).total_seconds(), 3) if outcome.finished else None,
        "controller": {"host": socket.gethostname(), "user": getpass.getuser(),
                       "python": platform.python_version(), "mlx": _controller_mlx()},
        "inventory": options.inventory,
        "hostfile": {"path": str(hostfile), "sha256": hashlib.sha256(hostfile.read_bytes()).hexdigest(),
                     "backend": outcome.cluster.backend},
        "interpreter": options.python,
        "options": {"sizes": options.sizes, "timeout_seconds": options.timeout,
                    "script": str(options.script) if options.script else None, "args": options.script_args,
                    "model": ({"name": options.model[0], "path": options.model[1]} if options.model else None),
                    "repeat": options.repeat, "rtol": options.rtol, "atol": options.atol},
    }


def build(outcome: Outcome, command: list[str]) -> dict:
    out = outcome.out
    entries = [_job_entry(job, out) for job in outcome.checks()]
    status = outcome.status
    script = None
    if outcome.options.script:
        script = {"path": str(outcome.options.script), "args": outcome.options.script_args,
                  "repeat": outcome.options.repeat, "rtol": outcome.options.rtol, "atol": outcome.options.atol,
                  "runs": [_run_entry(r) for r in outcome.single + outcome.scripted],
                  "jobs": [_job_entry(j, out) for j in outcome.jobs if j.kind == "script"],
                  "comparisons": [c.to_dict() for c in outcome.comparisons]}
    data = {
        "schema": SCHEMA,
        "status": status,
        "exit_code": EXIT[status],
        "level": outcome.level,
        "level_reasons": [reason_line(reason) for reason in outcome.reasons],
        "summary": "",
        "cluster": {"folder": str(outcome.cluster.folder), "backend": outcome.cluster.backend,
                    "ranks": _ranks(outcome)},
        "links": _links(outcome, entries),
        "checks": entries,
        "rdma": _rdma(outcome),
        "findings": [finding_dict(f) for f in outcome.findings],
        "script": script,
        "deliverable": [{"id": key, "item": text, "done": False} for key, text in compare.DELIVERABLE],
        "leftovers": outcome.leftovers,
        "record": _record(outcome, command),
        "files": {"json": JSON_FILE, "html": HTML_FILE, "plot": PLOT_FILE, "logs": LOG_DIR},
    }
    data["summary"] = headline(data)
    check(data)
    return data


_TOP = {"schema": str, "status": str, "exit_code": int, "level": (str, type(None)), "level_reasons": list,
        "summary": str, "cluster": dict, "links": list, "checks": list, "rdma": (dict, type(None)),
        "findings": list, "script": (dict, type(None)), "deliverable": list, "leftovers": dict, "record": dict,
        "files": dict}


def check(data: dict) -> None:
    """Raise ValueError unless data is a report of schema mlx-fleet-verify/1 (docs/verify.md)."""
    for key, kind in _TOP.items():
        if key not in data or not isinstance(data[key], kind):
            raise ValueError(f"verify.json: {key} missing or not {kind}")
    if data["schema"] != SCHEMA:
        raise ValueError(f"verify.json: schema {data['schema']!r}, expected {SCHEMA}")
    if data["status"] not in EXIT or data["exit_code"] != EXIT[data["status"]]:
        raise ValueError(f"verify.json: status {data['status']!r} with exit code {data['exit_code']}")
    if data["level"] not in (None, compare.RUNS, compare.REPRODUCES):
        raise ValueError(f"verify.json: unknown level {data['level']!r}")
    for finding in data["findings"]:
        if finding.get("cause") not in CAUSES or not finding.get("message"):
            raise ValueError(f"verify.json: finding without a known cause and a message: {finding}")
    for entry in data["checks"]:
        for key in ("name", "kind", "backend", "status", "ranks", "failures", "logs"):
            if key not in entry:
                raise ValueError(f"verify.json: check {entry.get('name')!r} has no {key}")
    for rank in data["cluster"].get("ranks", []):
        if not {"rank", "host", "ips"} <= rank.keys():
            raise ValueError(f"verify.json: rank entry {rank} lacks rank, host or ips")
    for item in data["deliverable"]:
        if not {"id", "item", "done"} <= item.keys():
            raise ValueError(f"verify.json: deliverable item {item} lacks id, item or done")


# --- words and numbers ------------------------------------------------------------------------------


def rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "-"
    unit, factor = next((u, f) for u, f in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3), ("B/s", 1))
                        if bytes_per_s >= f or f == 1)
    return f"{bytes_per_s / factor:.3g} {unit}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def headline(data: dict) -> str:
    ranks, links = len(data["cluster"]["ranks"]), len(data["links"])
    what = f"{data['cluster']['backend']}, {ranks} ranks, {links} cables"
    if data["status"] == UNREACHABLE:
        return f"unreachable ({what}): " + "; ".join(f["message"] for f in data["findings"] if f["cause"] == UNREACHABLE)
    level = f"; level: {data['level']}" if data["level"] else ""
    if data["status"] == PASSED:
        return f"passed ({what}){level}"
    causes = sorted({f["cause"] for f in data["findings"]}, key=CAUSES.index)
    rdma = f"; {data['rdma']['statement']}" if data["rdma"] and data["rdma"]["rdma"] != "works" else ""
    return f"failed ({what}){rdma}" + (f"; likely cause: {', '.join(causes)}" if causes else "") + level


def _first_failure(entry: dict) -> str:
    # failure_lines puts first a rank that said why, when one did
    more = len(entry["failures"]) - 1
    return entry["failures"][0] + (f" ({more} more in the report)" if more > 0 else "") if entry["failures"] else ""


def summary_lines(data: dict, folder: Path) -> list[str]:
    """What the terminal shows: the verdict, the figures, what failed and why, what is still needed."""
    lines = [f"mlx-fleet verify: {data['summary']}"]
    for entry in data["checks"]:
        if entry["kind"] != "all_sum":
            continue
        line = f"  {entry['name']} ({entry['backend']}): {entry['status']}"
        if entry["status"] != PASSED:
            line += f": {_first_failure(entry)}"
        elif entry["figures"]:
            best = max(entry["figures"], key=lambda f: f["bus_bytes_per_s"])
            line += ("; " + ", ".join(f"{format_size(f['bytes'])} {duration(f['seconds'])}" for f in entry["figures"])
                     + f"; peak bus bandwidth {rate(best['bus_bytes_per_s'])} at {format_size(best['bytes'])}")
        lines.append(line)
    by_name = {e["name"]: e for e in data["checks"]}
    for link in data["links"]:
        parts = []
        for check_ in link["checks"]:
            parts.append(f"{check_['backend']} {check_['status']}" + (
                f": {_first_failure(by_name[check_['name']])}" if check_["status"] != PASSED else ""))
        measured = (f"; latency {duration(link['latency_seconds'])}, bandwidth {rate(link['peak_bytes_per_s'])}"
                    if link["measured_with"] else "")
        lines.append(f"  cable {link['cable']}: {'; '.join(parts) or link['status']}{measured}")
    for finding in data["findings"]:
        lines.append(f"  {finding['cause']}: {finding['message']}")
    reasons = data["level_reasons"]
    for reason in reasons[:3]:
        lines.append(f"  level {data['level'] or 'none'}: {reason}")
    if len(reasons) > 3:
        lines.append(f"  ({len(reasons) - 3} more in the report)")
    lines.append("  deliverable still needs: " + "; ".join(item["item"] for item in data["deliverable"]
                                                          if not item["done"]))
    lines.append(f"  report: {folder / HTML_FILE} (data: {folder / JSON_FILE}, logs: {folder / LOG_DIR})")
    return lines


def print_summary(data: dict, folder: Path) -> None:
    """The summary on the terminal: the Macs' and the ranks' text in it cleaned (terminal_text)."""
    print(terminal_text(summary_lines(data, folder)))


# --- the picture and the page -----------------------------------------------------------------------


def plot_svg(data: dict) -> str | None:
    """Bandwidth against message size: all_sum's bus bandwidth and each cable's; None without figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = []
    for entry in data["checks"]:
        figures = entry.get("figures") or []
        if not figures:
            continue
        key = "bus_bytes_per_s" if entry["kind"] == "all_sum" else "bytes_per_s"
        label = f"all_sum, bus ({entry['backend']})" if entry["kind"] == "all_sum" else \
            f"{entry['cable']} ({entry['backend']})"
        series.append((label, [f["bytes"] for f in figures], [f[key] / 1e9 for f in figures]))
    if not series:
        return None
    matplotlib.rcParams["svg.hashsalt"] = "mlx-fleet-verify"  # stable ids: the same data, the same file
    figure, axes = plt.subplots(figsize=(7.2, 3.6), dpi=100)
    for label, sizes, values in series:
        axes.plot(sizes, values, marker="o", markersize=3, linewidth=1.2, label=label)
    axes.set_xscale("log", base=2)
    axes.set_xticks(series[0][1], [format_size(s) for s in series[0][1]], rotation=45, fontsize=7)
    axes.set_xlabel("message size")
    axes.set_ylabel("GB/s")
    axes.grid(True, which="major", linewidth=0.4, alpha=0.6)
    axes.legend(fontsize=7, loc="upper left")
    axes.set_title("Bandwidth by message size", fontsize=10)
    figure.tight_layout()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(t) for t in TEMPLATES]),
                             autoescape=lambda name: bool(name) and ".html" in name,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(rate=rate, duration=duration, size=format_size)
    return env


def render_html(data: dict, svg: str | None) -> str:
    inline = svg[svg.index("<svg"):] if svg else None  # the figure itself, without the XML prologue
    return _environment().get_template("verify.html.j2").render(report=data, plot=inline)


def write(folder: Path, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    svg = plot_svg(data)
    if svg:
        atomic_write_text(folder / PLOT_FILE, svg)
    # Not atomic_write_json: a script's NaN would not compare equal to itself on reading back.
    atomic_write_text(folder / JSON_FILE, json_text(data), lambda text: check(json.loads(text)))
    atomic_write_text(folder / HTML_FILE, render_html(data, svg))
