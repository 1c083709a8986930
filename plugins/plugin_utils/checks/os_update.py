"""macOS updates across the cluster: the target, the order, the record to resume from, the checks.

One Mac at a time, because JACCL needs every Mac on the same build and a Mac that does not come
back must leave the others on a build that still works together; a canary first (never rank 0)
so a bad update stops at one Mac; rank 0 (the first host of the inventory, where mlx.launch's
rank 0 runs) last. The record (OUTPUT_DIR/os-update.json) says which Macs are done for which
target, so a rerun never updates a Mac twice and skips none.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HELD
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json, atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.versions import version_tuple

RECORD_FILE = "os-update.json"
RECORD_FORMAT = "mlx-fleet-os-update/1"
DONE, STARTED, FAILED = "done", "started", "failed"
DEFAULT_TIMEOUT = 40 * 60  # seconds a Mac may take to prepare, restart and come back


class Refused(ValueError):
    """The plan cannot go ahead; each line names a Mac and why."""

    def __init__(self, lines: list[str], bad_input: bool = False):
        super().__init__("\n".join(lines))
        self.lines = lines
        self.bad_input = bad_input  # the input is wrong (exit 2), not the cluster's state (exit 1)


def macos_offers(mac: dict) -> list[dict]:
    """The macOS updates a Mac is offered (not Safari, not the Command Line Tools)."""
    return [u for u in mac.get("updates", []) if u.get("macos") and u.get("build")]


def choose_target(names: list[str], macs: dict[str, dict], wanted: str | None) -> dict:
    """{version, build, labels: {mac: label}} that every Mac is on or offered; Refused otherwise.

    Without `wanted`, the newest macOS update every Mac offers (or is already on)."""
    known: dict[str, dict] = {}
    for name in names:
        known.setdefault(macs[name]["build"], {"version": macs[name]["version"], "build": macs[name]["build"]})
        for u in macos_offers(macs[name]):
            known.setdefault(u["build"], {"version": u["version"], "build": u["build"]})

    def reach(build: str) -> dict[str, str | None] | None:
        labels = {}
        for name in names:
            offer = next((u for u in macos_offers(macs[name]) if u["build"] == build), None)
            if macs[name]["build"] != build and offer is None:
                return None
            labels[name] = offer["label"] if macs[name]["build"] != build else None
        return labels

    if wanted:
        matches = [t for t in known.values() if wanted in (t["build"], t["version"])]
        if not matches:
            raise Refused([f"no Mac is on or offered macOS {wanted}: " + offered_line(names, macs)], bad_input=True)
        target = max(matches, key=_newness)
        labels = reach(target["build"])
        if labels is None:
            missing = [n for n in names if macs[n]["build"] != target["build"]
                       and not any(u["build"] == target["build"] for u in macos_offers(macs[n]))]
            raise Refused([f"{n}: not offered macOS {target['version']} ({target['build']}); it offers "
                           f"{_offers_text(macs[n])}" for n in missing])
        return dict(target, labels=labels)
    reachable = [t for t in known.values() if reach(t["build"]) is not None]
    if not reachable:
        raise Refused(["no macOS build is offered to every Mac: " + offered_line(names, macs)
                       + "; give one with --to"])
    target = max(reachable, key=_newness)
    return dict(target, labels=reach(target["build"]))


def build_tuple(build: str) -> tuple:
    """(25, "C", 101, "") from "25C101", in the order Apple numbers builds (major, train letter, number, a
    security response's letter); () for a build of another form, which then orders first."""
    found = re.fullmatch(r"(\d+)([A-Z])(\d+)([a-z]?)", build or "")
    return (int(found[1]), found[2], int(found[3]), found[4]) if found else ()


def _newness(target: dict) -> tuple:
    return version_tuple(target["version"]), build_tuple(target["build"])


def _offers_text(mac: dict) -> str:
    offers = macos_offers(mac)
    return ", ".join(f"{u['version']} ({u['build']})" for u in offers) if offers else "no macOS update"


def offered_line(names: list[str], macs: dict[str, dict]) -> str:
    return "; ".join(f"{n} on {macs[n]['build']} offers {_offers_text(macs[n])}" for n in names)


def job_refusals(names: list[str], macs: dict[str, dict]) -> list[str]:
    return [f"{n}: an MLX job is running (pid {job['pid']}: {job['command'][:80]}); let it finish or stop it, "
            "then run again" for n in names for job in macs[n].get("jobs", [])[:1]]


def order(names: list[str], todo: list[str], canary: str | None) -> list[str]:
    """The Macs of `todo` in update order: the canary, the others in inventory order, rank 0 last."""
    rank0 = names[0]
    if canary is not None:
        if canary not in names:
            raise Refused([f"--canary {canary}: not a Mac of the cluster ({', '.join(names)})"])
        if canary == rank0 and len(names) > 1:
            raise Refused([f"--canary {canary}: it is rank 0, which is updated last; choose another Mac"])
    candidates = [n for n in todo if n != rank0]
    first = canary if canary in todo else (candidates[0] if candidates else None)
    middle = [n for n in todo if n not in (first, rank0)]
    return ([first] if first else []) + middle + ([rank0] if rank0 in todo and rank0 != first else [])


class BadRecord(Refused):
    """OUTPUT_DIR/os-update.json is not a record this version can trust; its one line names the file, what is
    wrong and the fix (every reader of the record raises this, and only this, for a malformed file)."""

    def __init__(self, path: str | Path, why: str):
        super().__init__([f"{path}: not a readable update record ({why}); move it away to start afresh"],
                         bad_input=True)


# What each field of a record must be: a Mac's entry, and the record around it.
_MAC_FIELDS = {"status": str, "at": str, "reason": str, "installed": bool, "before": dict, "after": dict}
_RECORD_FIELDS = {"target": dict, "macs": dict, "plan": dict, "started_at": str, "finished_at": str,
                  "inventory": str}


def _check_fields(path, where: str, value: dict, fields: dict) -> None:
    for key, kind in fields.items():
        if key in value and not isinstance(value[key], kind):
            raise BadRecord(path, f"{where}{key} is {type(value[key]).__name__}, not {kind.__name__}")


def read_record(path: str | Path) -> dict | None:
    """The record at PATH, its fields checked; None when there is none or it is another format's (a fresh
    update then writes its own). BadRecord, naming PATH, when it cannot be read as one."""
    import json

    try:
        record = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise BadRecord(path, str(exc)) from None
    if not isinstance(record, dict):
        raise BadRecord(path, f"a {type(record).__name__}, not an object")
    if record.get("format") != RECORD_FORMAT:
        return None
    _check_fields(path, "", record, _RECORD_FIELDS)
    target = record.get("target")
    if not target or not all(isinstance(target.get(k), str) for k in ("version", "build")):
        raise BadRecord(path, "its target has no version and build")
    record.setdefault("macs", {})
    for name, mac in record["macs"].items():
        if not isinstance(mac, dict):
            raise BadRecord(path, f"macs.{name} is {type(mac).__name__}, not dict")
        _check_fields(path, f"macs.{name}.", mac, _MAC_FIELDS)
        if mac.get("status") not in (DONE, STARTED, FAILED):
            raise BadRecord(path, f"macs.{name}.status is {mac.get('status')!r}")
    current = (record.get("plan") or {}).get("current", {})
    if not isinstance(current, dict):
        raise BadRecord(path, "plan.current is not an object")
    return record


def installing(mac: dict) -> bool:
    """The Mac's install started (softwareupdate said so) and no later step ended: a rerun waits for its
    restart rather than installing again."""
    return mac.get("status") == STARTED and bool(mac.get("installed"))


def plan(names: list[str], macs: dict[str, dict], *, wanted: str | None, canary: str | None,
         record: dict | None) -> dict:
    """Everything the update does, decided before any Mac changes; Refused names what stops it."""
    refusals = job_refusals(names, macs)
    if refusals:
        raise Refused(refusals)
    target = choose_target(names, macs, wanted)
    same = record is not None and record.get("target", {}).get("build") == target["build"]
    done = [n for n in names if same and record["macs"].get(n, {}).get("status") == DONE
            and macs[n]["build"] == target["build"]]
    todo = [n for n in names if n not in done]
    if all(macs[n]["build"] == target["build"] for n in names) and not (same and todo):
        todo = []  # every Mac on the target already: nothing to install, and nothing was started
    ordered = order(names, todo, canary)
    return {
        "target": {"version": target["version"], "build": target["build"]},
        "labels": {n: target["labels"][n] for n in ordered},
        "current": {n: {"version": macs[n]["version"], "build": macs[n]["build"]} for n in names},
        "offers": {n: [{k: u[k] for k in ("label", "version", "build")} for u in macos_offers(macs[n])] for n in names},
        "order": ordered,
        "install": [n for n in ordered if macs[n]["build"] != target["build"]],
        "done": done,
        "rank0": names[0],
        "resumed": bool(same and done),
    }


def plan_lines(p: dict) -> list[str]:
    t = p["target"]
    lines = [f"target: macOS {t['version']} ({t['build']})"]
    for name, cur in p["current"].items():
        role = " (rank 0)" if name == p["rank0"] else ""
        state = ("done earlier" if name in p["done"] else "to install" if name in p["install"]
                 else "on the target, to check" if name in p["order"] else "on the target")
        offers = ", ".join(f"{u['label']} ({u['version']}, {u['build']})" for u in p["offers"].get(name, []))
        lines.append(f"  {name}{role}: {cur['version']} ({cur['build']}): {state}; offered: {offers or 'no macOS update'}")
    lines.append("order: " + (" -> ".join(p["order"]) if p["order"] else "nothing to do"))
    return lines


def interrupted_lines(record: dict) -> list[str]:
    """What a Ctrl-C during an update leaves, from the record: the Macs whose install goes on by itself."""
    midway = [n for n, m in record.get("macs", {}).items() if m.get("status") == STARTED]
    return ["interrupted" + (f" while {', '.join(midway)} was updating: its update goes on by itself (never "
                             "force a restart)" if midway else ""),
            "result: run mlx-fleet os-update again to resume: it checks "
            + (f"{', '.join(midway)} first and " if midway else "") + "installs no Mac twice (exit 130)"]


def new_record(p: dict, previous: dict | None) -> dict:
    if previous is not None and previous.get("target", {}).get("build") == p["target"]["build"]:
        return dict(previous, plan=p)
    return {"format": RECORD_FORMAT, "target": p["target"], "started_at": now(), "plan": p, "macs": {}}


def mark(record: dict, name: str, status: str, **fields) -> dict:
    record["macs"][name] = dict(record["macs"].get(name, {}), status=status, at=now(), **fields)
    if status == DONE and all(record["macs"].get(n, {}).get("status") == DONE for n in record["plan"]["current"]):
        record["finished_at"] = now()
    return record


def write_record(path: str | Path, record: dict) -> None:
    """The record, and beside it the controller's hold marker (HELD_FILE) as the record now says."""
    atomic_write_json(path, record)
    sync_held(Path(path).parent)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- after a Mac came back ------------------------------------------------------------------------

def check_after(name: str, before: dict, after: dict, build: str, rdma_expected: bool | None, *,
                converge: str) -> list[dict]:
    """What is wrong with a Mac after its update; each {kind, reason, visit (a person must go), steps}. CONVERGE: the
    command that converges the cluster, in the install's form (plugin_utils.base.fixes.run_command)."""
    problems = []
    if after["build"] != build:
        problems.append({"kind": "not-installed",
                         "reason": f"still on {after['version']} ({after['build']}) after its restart: the update "
                                   "did not install", "visit": False,
                         "steps": ["Look at System Settings > General > Software Update on the Mac for the error",
                                   "then run mlx-fleet os-update again"]})
    if rdma_expected and after.get("rdma_enabled") is False:
        problems.append({"kind": "rdma-off",
                         "reason": "RDMA is off after the update: the Recovery step must be done again at the Mac",
                         "visit": True,
                         "steps": ["Shut the Mac down; hold the power button until 'Loading startup options' shows",
                                   "Options > Continue; in Utilities > Terminal run: rdma_ctl enable",
                                   "Restart the Mac, then run mlx-fleet os-update again"]})
    lost = sorted(f"{dev} {addr}" for dev, addrs in (before.get("addresses") or {}).items()
                  for addr in addrs if addr not in (after.get("addresses") or {}).get(dev, []))
    if lost:
        problems.append({"kind": "addresses-lost",
                         "reason": "Thunderbolt addresses gone after the update: " + ", ".join(lost), "visit": False,
                         "steps": [f"Run {converge}, then mlx-fleet os-update again"]})
    if before.get("mlx_imports") and not after.get("mlx_imports"):
        problems.append({"kind": "mlx-broken",
                         "reason": f"the MLX environment no longer imports MLX ({after.get('mlx_error') or 'no error'})",
                         "visit": False, "steps": [f"Run {converge}, then mlx-fleet os-update again"]})
    return problems


def own_findings(name: str, findings) -> list[dict]:
    """The audit's rows that differ (plugin_utils.checks.audit.Audit.drifted) about this Mac alone: not the cluster's (the lock, the
    controller's hostfile), which one Mac's update neither causes nor fixes."""
    return [{k: getattr(f, k) for k in ("topic", "fact", "expected", "found", "fix")} for f in findings
            if f.macs == [name]]


def audit_problems(findings: list[dict], drift_before: list[str]) -> list[dict]:
    """The Mac's audit after its update: each finding the audit did not already have before it, as a problem.
    Drift that was there before is the audit's to report, not a reason to stop halfway (the builds split)."""
    return [{"kind": "audit", "fact": f["fact"],
             "reason": f"the audit after the update: {f['fact']}: expected {f['expected']}; found {f['found']}",
             "visit": False, "steps": [f"Fix: {f['fix']}" if f["fix"] else "Run mlx-fleet audit for the details",
                                       "Then run mlx-fleet os-update again (it resumes here)"]}
            for f in findings if f["fact"] not in drift_before]


WAIT_PROBLEMS = {
    "no-restart": ("did not restart within {timeout:g} s of starting the update (its preparation never finished); "
                   "still on {build}", False,
                   ["Look at System Settings > General > Software Update on the Mac",
                    "Never force a restart during the preparation: it aborts the update",
                    "Run mlx-fleet os-update again once the Mac is idle"]),
    "no-return": ("went down for the update and did not come back within {timeout:g} s", True,
                  ["Go to the Mac: is it on, at a progress bar, or at the login window?",
                   "If it is off, press its power button; wait for the update to finish",
                   "Then run mlx-fleet os-update again (it resumes here)"]),
    "locked": ("came back FileVault-locked and cannot be unlocked over SSH: a person must log in at the Mac", True,
               ["At the Mac's login window, log in with a volume owner's account (this unlocks the disk)",
                "Then run mlx-fleet os-update again (it resumes here)"]),
    "old-build": ("restarted but is still on {build}: the update did not install", False,
                  ["Look at System Settings > General > Software Update on the Mac for the error",
                   "Then run mlx-fleet os-update again"]),
}


def install_problem(message: str, error: str = "") -> dict:
    """softwareupdate --install refused or did not start: nothing changed on the Mac. ERROR is softwareupdate's
    own line that says why (macos_update's error), MESSAGE the step's line for a person."""
    if "failed to authorize" in error:
        steps = ["Check the volume owner's password (--password-file, or the one typed) and that the user "
                 "(mlx_fleet_os_update_user, default ansible_user) can unlock this Mac's disk (an administrator in "
                 "System Settings > Users & Groups)"]
    else:
        steps = ["Look at System Settings > General > Software Update on the Mac",
                 "Never force a restart: it aborts an update being prepared"]
    return {"kind": "install", "reason": message, "visit": False,
            "steps": steps + ["Then run mlx-fleet os-update again"]}


def wait_problem(kind: str, *, timeout: float, build: str) -> dict:
    text, visit, steps = WAIT_PROBLEMS[kind]
    return {"kind": kind, "reason": text.format(timeout=timeout, build=build), "visit": visit, "steps": steps}


def visit_sheet_text(name: str, problem: dict, *, location: str | None, target: dict, inventory: str) -> str:
    lines = [f"mlx-fleet visit sheet: {name}" + (f" ({location})" if location else ""),
             f"macOS update to {target['version']} ({target['build']}) stopped at this Mac:",
             f"  {problem['reason']}", "", "At the Mac:"]
    lines += [f"  {i}. {step}" for i, step in enumerate(problem["steps"], 1)]
    lines += ["", f"Afterwards, from the controller: mlx-fleet os-update -i {inventory}", ""]
    return "\n".join(lines)


def write_visit_sheet(output_dir: str | Path, name: str, text: str) -> Path:
    path = Path(output_dir) / f"os-update-visit-{name}.txt"
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


def unfinished(output_dir: str | Path, starting: bool = False):
    """(target, the Macs, those done) of an update whose Macs' builds may differ; None when nothing is held.
    `starting`: the update is about to install, so it holds already (and an unfinished record too)."""
    record = read_record(Path(output_dir) / RECORD_FILE)
    if not record or record.get("finished_at"):
        return None
    names = list(record.get("plan", {}).get("current", {}))
    done = [n for n in names if record["macs"].get(n, {}).get("status") == DONE]
    if not starting and not done and not any(m.get("installed") for m in record["macs"].values()):
        return None  # no Mac's build changed yet (refused before any install): nothing to hold
    return record["target"], names, done


def hold_reason(output_dir: str | Path) -> str | None:
    """One line when an update is unfinished (the Macs' builds may differ, and JACCL needs one build): the
    cluster is held until `mlx-fleet os-update` finishes it. None otherwise."""
    try:
        held = unfinished(output_dir)
    except Refused as exc:
        return str(exc)
    if held is None:
        return None
    target, names, done = held
    return (f"the cluster is held: the macOS update to {target['version']} ({target['build']}) is unfinished "
            f"(done: {', '.join(done) or 'none'}; to do: {', '.join(n for n in names if n not in done)}), and "
            "Macs on different builds cannot run a job together: finish it with mlx-fleet os-update")


# The hold beside the hostfiles, on the controller and on every Mac (module_utils.files.HELD).
HELD_FILE = HELD


def hold_line(output_dir: str | Path, inventory: str = "INVENTORY", starting: bool = False) -> str | None:
    """The hold in one line, as the hostfile step's summary and HELD_FILE say it; None when not held."""
    try:
        held = unfinished(output_dir, starting)
    except Refused as exc:
        return f"held: {exc}"
    if held is None:
        return None
    target, names, done = held
    # Written on the Macs once at the start (`starting`), so no count there that would go stale.
    count = "every Mac going" if starting else f"{len(done)} of {len(names)} Macs"
    return (f"held: os-update in progress ({count} on {target['build']}, macOS {target['version']}; Macs on "
            f"different builds cannot run a job together); run mlx-fleet os-update -i {inventory} to finish")


def sync_held(output_dir: str | Path, inventory: str | None = None) -> str | None:
    """Write or remove OUTPUT_DIR/HELD_FILE as the record says; the hold line, or None when released."""
    line = hold_line(output_dir, inventory or _record_inventory(output_dir))
    path = Path(output_dir) / HELD_FILE
    if line:
        atomic_write_text(path, line + "\n")
    else:
        path.unlink(missing_ok=True)
    return line


def _record_inventory(output_dir: str | Path) -> str:
    try:
        record = read_record(Path(output_dir) / RECORD_FILE) or {}
    except Refused:
        record = {}
    return record.get("inventory") or "INVENTORY"


def record_summary(output_dir: str | Path) -> dict | None:
    """The last macOS update, for the run record: target, when, and each Mac's status."""
    try:
        record = read_record(Path(output_dir) / RECORD_FILE)
    except Refused:
        return None
    if not record:
        return None
    return {"target": record["target"], "started_at": record.get("started_at"),
            "finished_at": record.get("finished_at"),
            "macs": {n: m.get("status") for n, m in sorted(record.get("macs", {}).items())}}
