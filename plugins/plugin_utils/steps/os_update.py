"""One Mac's macOS update on the controller: start the install, wait (bounded) for the Mac to go down and come
back, then check it, recording each step so a rerun installs no Mac twice (plugin_utils.checks.os_update). What it
does on the Mac goes through the calls the action plugin mlx_fleet.cluster.os_update gives it (OnMac)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import StepFailed

# What the record keeps of a Mac before its update, to judge it after (a resume: as it was before it started).
KEPT = ("version", "build", "rdma_enabled", "addresses", "mlx_imports")


@dataclass(frozen=True)
class OnMac:
    """What the update does on the Mac, through Ansible."""

    read: Callable[[bool], dict]  # its os_update facts (True: with the slow checks)
    audit: Callable[[], list[dict]]  # the audit's findings about this Mac alone
    install: Callable[[str], dict]  # start the install with the volume owner's password: macos_update's result
    wait: Callable[[str, str, str], str]  # (build, old build, password): 'back', or what went wrong
    password: Callable[[], str | None]  # the volume owner's (secret_socket.SecretUnavailable: none to be had)


def update(name: str, plan: dict, mac: OnMac, *, output_dir: Path, timeout: float, inventory: str,
           location: str | None, cli: bool) -> dict:
    """The step's result for Mac NAME of PLAN (failed, with its problem and visit sheet, when the Mac did not
    come through); StepFailed when it cannot start."""
    target = plan["target"]
    record_path = output_dir / os_update.RECORD_FILE
    try:
        record = os_update.read_record(record_path) or os_update.new_record(plan, None)
    except os_update.BadRecord as exc:
        raise StepFailed([str(exc)]) from None
    record["inventory"] = inventory  # for the hold line beside the hostfiles
    result = {"changed": False, "host": name}

    def stop(problem):
        os_update.mark(record, name, os_update.FAILED, reason=problem["reason"])
        os_update.write_record(record_path, record)
        lines = [f"{name}: {problem['reason']}"]
        if problem["visit"]:
            sheet = os_update.write_visit_sheet(output_dir, name, os_update.visit_sheet_text(
                name, problem, location=location, target=target, inventory=inventory))
            lines.append(f"visit sheet: {sheet}")
            result["visit_sheet"] = str(sheet)
        return dict(result, failed=True, msg="\n".join(lines), problem=problem)

    before = mac.read(True)
    previous = record["macs"].get(name, {})
    if "before" in previous:  # resumed: what the Mac had before its update started
        kept = ("rdma_enabled", "addresses", "mlx_imports", "audit_drift")
        before = dict(before, **{k: previous["before"][k] for k in kept if k in previous["before"]})
    kept = {k: before.get(k) for k in KEPT}
    if before["build"] != target["build"]:
        # What the audit already found before the update is not the update's doing (kept for a resume).
        if "audit_drift" not in before:
            before["audit_drift"] = [f["fact"] for f in mac.audit()]
        kept["audit_drift"] = before["audit_drift"]
        password = _password(name, mac)
        if not os_update.installing(previous):
            os_update.mark(record, name, os_update.STARTED, before=previous.get("before", kept))
            os_update.write_record(record_path, record)
            res = mac.install(password)
            if res.get("failed"):
                return stop(os_update.install_problem(res.get("msg", "softwareupdate --install failed"),
                                                      res.get("error") or ""))
            result["changed"] = True
            os_update.mark(record, name, os_update.STARTED, installed=True)  # from here its build may change
            os_update.write_record(record_path, record)
        # else an interrupted run started its install, which goes on by itself: wait for its restart
        outcome = mac.wait(target["build"], before["build"], password)
        if outcome != "back":
            return stop(os_update.wait_problem(outcome, timeout=timeout, build=before["build"]))
    after = mac.read(True)
    problems = os_update.check_after(name, before, after, target["build"], before.get("rdma_enabled"),
                                     converge=fixes.run_command("site", inventory, cli=cli))
    if not problems:
        problems = os_update.audit_problems(mac.audit(), before.get("audit_drift") or [])
    if problems:
        return stop(problems[0])
    os_update.mark(record, name, os_update.DONE, before=previous.get("before", kept),
                   after={k: after.get(k) for k in ("version", "build", "rdma_enabled")})
    os_update.write_record(record_path, record)
    return dict(result, msg=f"{name}: on macOS {after['version']} ({after['build']}), checked")


def _password(name: str, mac: OnMac) -> str:
    """The volume owner's password the install needs; StepFailed, before anything is installed, without it."""
    try:
        password = mac.password()
    except secret_socket.SecretUnavailable as exc:
        raise StepFailed([f"{name}: {exc}"]) from None
    if not password:
        raise StepFailed(["no volume owner password: mlx-fleet os-update asks it (or --password-file)"])
    return password
