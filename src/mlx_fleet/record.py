"""`mlx-fleet record`: the run record a lab keeps with an experiment (docs/audit.md).

The Macs and the cluster as the audit read them (plugin_utils.checks.run_record), plus the mlx-fleet version,
the inventory's git commit and dirty flag, the time, and with ``-- COMMAND`` the exact launch command
and the git commit of the current folder's repository. JSON (``mlx-fleet-record/1``) plus a short
Markdown rendering for a lab notebook; ``--diff A B`` says what changed between two records.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import (
    atomic_write_json, atomic_write_text, load_json)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.readiness import STATUS_WORDS
from mlx_fleet import __version__
from mlx_fleet.errors import UserError

FORMAT = "mlx-fleet-record/1"
TIME_KEY = "recorded_at"
GIT_TIMEOUT = 10  # seconds
MAX_DEPTH = 32  # a record nests about 6 deep; --diff refuses what no record holds rather than recursing


def git_state(path: Path, exclude: Path | None = None) -> dict | None:
    """{"commit", "dirty"} of the repository holding PATH (dirty: a change under PATH, EXCLUDE aside)."""
    folder = path if path.is_dir() else path.parent

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT)

    try:
        head = git("rev-parse", "HEAD")
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    spec = [str(path)]
    if exclude is not None and exclude.resolve().is_relative_to(folder.resolve()):
        spec.append(f":(exclude){exclude.resolve()}")
    status = git("status", "--porcelain", "--", *spec)
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def build(facts: dict, *, inventory: Path, output_dir: Path, recorded_at: str, not_recorded: list[str],
          command: list[str] | None = None, cwd: Path | None = None) -> dict:
    """The record: FACTS (run_record.record_facts, from the audit's reads) with where and when."""
    return {
        "format": FORMAT,
        TIME_KEY: recorded_at,
        "mlx_fleet_version": __version__,
        "inventory": {"path": str(inventory.resolve()), "git": git_state(inventory.resolve(), output_dir)},
        "command": ({"argv": command, "text": shlex.join(command), "cwd": str(cwd),
                     "git": git_state(cwd)} if command else None),
        "not_recorded": not_recorded,
        "cluster": facts["cluster"],
        "macs": facts["macs"],
        "models": facts["models"],
        "macos_update": os_update.record_summary(output_dir),
    }


def save(facts: dict, *, inventory: Path, output_dir: Path, not_recorded: list[str], command: list[str] | None,
         out: Path | None = None) -> tuple[dict, Path]:
    """The record of FACTS for COMMAND, made now, written to OUT (default OUTPUT_DIR/records/record-TIME.json) with
    its Markdown beside it: (the record, its path)."""
    now = datetime.now(timezone.utc)
    out = out or output_dir / "records" / f"record-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    record = build(facts, inventory=inventory, output_dir=output_dir, recorded_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                   not_recorded=not_recorded, command=command, cwd=Path(os.getcwd()))
    write(out, record)
    return record, out


def write(path: Path, record: dict) -> None:
    """The record's JSON at PATH and its Markdown beside it (.md)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, record)
    atomic_write_text(path.with_suffix(".md"), markdown(record))


def _git_text(state: dict | None) -> str:
    if not state:
        return "not in a git repository"
    return f"git {state['commit'][:12]}{', with uncommitted changes' if state['dirty'] else ''}"


def markdown(record: dict) -> str:
    """A short rendering for a lab notebook; the JSON beside it holds everything."""
    cluster, macs = record["cluster"], record["macs"]
    lines = [f"# Run record {record[TIME_KEY]}", "",
             f"- mlx-fleet {record['mlx_fleet_version']}; inventory `{record['inventory']['path']}` "
             f"({_git_text(record['inventory']['git'])})"]
    if record["command"]:
        command = record["command"]
        lines.append(f"- command: `{command['text']}` in `{command['cwd']}` ({_git_text(command['git'])})")
    hostfile = cluster["hostfile"]
    lines.append(f"- backend: {cluster['backend'] or 'none'}; hostfile sha256 "
                 f"{hostfile['sha256'][:16] if hostfile else 'none'}; envs: {', '.join(cluster['envs']) or 'none'}")
    lines.append("- cables: " + (", ".join(f"{c['cable']} ({c['speed_gbps']:g} Gb/s)" for c in cluster["cables"])
                                 or "none"))
    update = record.get("macos_update")
    if update:
        target = f"{update['target']['version']} ({update['target']['build']})"
        lines.append(f"- last macOS update: {target}, " + (f"finished {update['finished_at']}" if update["finished_at"]
                     else "unfinished: " + ", ".join(f"{n} {s}" for n, s in update["macs"].items())))
    run = record.get("run")
    if run:
        lines.append(f"- run {run['id']}: exit status {run['exit_status']} after {run['seconds']:g} s; "
                     + ", ".join(f"rank {r['rank']} on {r['mac']} {r['ending']}" for r in run["ranks"]))
    lines += [_model_line(name, model) for name, model in record.get("models", {}).items()]
    if record["not_recorded"]:
        lines.append(f"- not recorded (unreachable): {', '.join(record['not_recorded'])}")
    lines += ["", "| Mac | macOS | model | serial | memory | Python | mlx | mlx-lm | packages | wired limit | RDMA |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, mac in macs.items():
        packages = mac["packages"]
        rdma = cluster["rdma"].get(name, "-")

        def version(package: str) -> str:
            return packages.get(package, {}).get("version", "-")

        lines.append(
            f"| {name} | {mac['macos']['version']} ({mac['macos']['build']}) | {mac['model']['identifier']} | "
            f"{mac['serial_number']} | {mac['memory_bytes'] >> 30} GB | "
            f"{(mac['python'] or {}).get('version', '-')} | {version('mlx')} | {version('mlx-lm')} | {len(packages)} | "
            f"{mac['wired_limit_mb']} MB | {STATUS_WORDS.get(rdma, rdma)} |")
    return "\n".join(lines) + "\n"


def _model_line(name: str, model: dict) -> str:
    """A declared model: where it comes from, its files, and how each Mac held it."""
    source = model["source"]
    if source is None:
        return f"- model {name}: not pinned"
    where = (f"{source['repo']} at {source['revision']} ({source['commit'][:12]})" if "repo" in source
             else f"`{source['path']}`")
    held: dict[str, list[str]] = {}
    for mac, state in model["macs"].items():
        held.setdefault(state, []).append(mac)
    return (f"- model {name}: {where}, {len(model['files'])} files, "
            f"{sum(f['size'] for f in model['files'].values())} bytes; "
            + "; ".join(f"{state} on {', '.join(macs)}" for state, macs in held.items()))


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _depth(value) -> int:
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        pending += [(child, depth + 1) for child in children]
    return deepest


def load(path: str) -> dict:
    try:
        record = load_json(Path(path).read_text())
    except OSError as exc:
        raise UserError(f"cannot read the record {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UserError(f"{path} is not a record ({exc}); give two files written by mlx-fleet record") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise UserError(f"{path} is not a {FORMAT} record; give two files written by mlx-fleet record")
    if _depth(record) > MAX_DEPTH:
        raise UserError(f"{path} nests values more than {MAX_DEPTH} deep, which no record does; give two files "
                        "written by mlx-fleet record")
    return record


_ABSENT = object()  # a key one record lacks: never equal to a value, not even the text "(absent)"


def _shown(value) -> str:
    if value is _ABSENT:
        return "(absent)"
    return value if isinstance(value, str) and value != "(absent)" else json.dumps(value)


def changes(a: dict, b: dict) -> list[tuple[str, str, str]]:
    """(path, old, new) per value that differs, as shown, the time stamp first; a key only one record has is
    "(absent)" in the other."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    found = []
    for key in sorted(flat_a.keys() | flat_b.keys(), key=lambda k: (k != TIME_KEY, k)):
        old, new = flat_a.get(key, _ABSENT), flat_b.get(key, _ABSENT)
        if old != new and _shown(old) != _shown(new):  # NaN is not equal to itself, yet unchanged
            found.append((key, _shown(old), _shown(new)))
    return found


def diff(a: dict, b: dict) -> list[str]:
    """One line per value that differs: "path: old -> new"."""
    return [f"{key}: {old} -> {new}" for key, old, new in changes(a, b)]
