"""The end-of-run summary, one home for both installs: the CLI (src/mlx_fleet/runner/, from
ansible-runner's events) and the collection's callback plugin (mlx_fleet.cluster.summary, for plain
ansible-playbook and AWX) fill a RunOutcome from the same task results and print the same lines: what
failed where, what a person must do (the Recovery checklist, the cables), the backend and why, the
hostfiles, what changed. The CLI adds its own (the run log, the exit status)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# A role's check of its own variables: instant, and no step a person needs to follow.
ARGUMENT_CHECK = "ansible.builtin.validate_argument_spec"
CONTROLLER = "localhost"  # where the inventory check runs: the controller, not a Mac
# The key of a failed result that lists its lines which are bad input: nothing was changed and the
# inventory (or how it reaches a Mac) is what to fix. The CLI reads it to exit 2 rather than 1.
INPUT_ERRORS = "input_errors"
# The key of a refusal's other lines (not bad input): the CLI shows them as the failure, by this data, never by
# comparing the message's lines with the marked ones.
OTHER_ERRORS = "other_errors"
# The key of a result of a step run once for the whole cluster (run_once): what it changed is the
# controller's files (hostfiles, checklist, downloads), not the Mac Ansible ran it under. The action
# plugins set these (plugin_utils.glue.actions); they are here so the CLI reads them without ansible's plugins.
CLUSTER_STEP = "cluster_step"


def natural_key(name: str) -> list:
    """Sort key that puts mini-2 before mini-10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", str(name))]


def natural(names) -> list[str]:
    return sorted(names, key=natural_key)


def first_line(text) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def size(count: int | None) -> str:
    """A byte count a person reads: 1.3 GB, 512 MB, 20 kB, 7 B (decimal units, as Finder shows them)."""
    if count is None:
        return "unknown"
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def message(res: dict) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or res.get("reason") or ""
    return str(msg).strip()


@dataclass
class RunOutcome:
    """What a run did, from its task results: the summary is built from this alone."""

    rc: int = 0  # ansible-playbook's exit status, where known (0, 2 and 4: it finished)
    changed: set[str] = field(default_factory=set)
    controller_changed: bool = False  # a step run once for the cluster rewrote the controller's files
    failed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # Mac -> (task, what it said) of its failures
    cluster_failed: list[tuple[str, str]] = field(default_factory=list)  # (step, what it said) of the steps run
    # once for the whole cluster
    unreachable: dict[str, str] = field(default_factory=dict)
    results: dict[str, list[dict]] = field(default_factory=dict)
    # A warning's text -> the Macs whose own tasks gave it (none: a cluster step's or Ansible's, which say
    # where themselves); the same warning from several Macs is one line naming them all.
    warnings: dict[str, list[str]] = field(default_factory=dict)
    input_errors: list[str] = field(default_factory=list)
    check: bool = False  # --check: "changed" means "would change", and nothing was written

    def result(self, action: str) -> dict | None:
        """The last result of a task with this action (e.g. mlx_fleet.cluster.fabric)."""
        found = self.results.get(action)
        return found[-1] if found else None

    @property
    def clean(self) -> bool:
        """Finished with nothing failed, unreachable or refused."""
        return not (self.input_errors or self.unreachable or self.failed or self.cluster_failed or self.rc != 0)

    def record(self, kind: str, host: str, action: str, task: str, res: dict, failed: bool) -> None:
        """One task result; kind as ansible-runner names it (runner_on_ok, _failed, _unreachable, _skipped)."""
        if kind == "runner_on_unreachable":
            self.unreachable.setdefault(host, first_line(message(res)) or "unreachable")
            return
        if kind == "runner_on_skipped":
            return
        if kind == "runner_on_ok" and res.get("changed"):
            if res.get(CLUSTER_STEP) or host == CONTROLLER:
                self.controller_changed = True  # a cluster step changes the controller's files, not its Mac
            else:
                self.changed.add(host)
        if action:
            self.results.setdefault(action, []).append(res)
        mac = None if res.get(CLUSTER_STEP) or host == CONTROLLER else host
        for warning in res.get("warnings", []) or []:
            self.warn(first_line(warning), mac)
        if failed:
            # The checks mark the lines that are bad input (plugin_utils.glue.actions.refusal); a line two
            # Macs share (the same Mac listed twice) is said once.
            bad = res.get(INPUT_ERRORS) or []
            self.input_errors.extend(line for line in bad if line not in self.input_errors)
            text = "\n".join(res[OTHER_ERRORS]) if OTHER_ERRORS in res else message(res).strip()
            if action == ARGUMENT_CHECK:
                task = "the role's variables"  # not "Validating arguments against arg spec 'main' - ..."
            if res.get(CLUSTER_STEP):  # the cluster's failure, not that of the Mac it ran under
                self.cluster_failed.append((task, text))
            elif text or not bad:
                self.failed.setdefault(host, []).append((task, text))

    def failures(self, host: str) -> list[str]:
        """What failed on HOST, one text each: "task: what it said"."""
        return [f"{task}: {text}" for task, text in self.failed.get(host, [])]

    def warn(self, text: str, host: str | None = None) -> None:
        """A warning, from HOST's own task when given."""
        if text:
            hosts = self.warnings.setdefault(text, [])
            if host and host not in hosts:
                hosts.append(host)

    def lines(self, extra: list[str] | None = None) -> list[str]:
        """The lines a person acts on: what failed and where, EXTRA, the warnings, what changed."""
        out = []
        for line in self.input_errors:
            out.append(f"error: {line}")
        for host in natural(self.unreachable):
            out.append(f"unreachable: {host}: {self.unreachable[host]}")
        failures = [f"{host}: {text}" for host in natural(self.failed) for text in self.failures(host)]
        for failure in failures + [f"{task}:\n{text}" for task, text in self.cluster_failed]:
            first, *more = failure.splitlines()
            out += [f"failed: {first}", *(f"  {line}" for line in more)]
        out += extra or []
        for warning, hosts in self.warnings.items():
            out.append(f"warning: {', '.join(natural(hosts))}: {warning}" if hosts else f"warning: {warning}")
        if self.changed:
            out.append(f"{'would change' if self.check else 'changed'}: {', '.join(natural(self.changed))}")
        elif self.controller_changed:
            out.append("no Mac would change (only the controller's files would)" if self.check
                       else "no Mac changed (only the controller's files did)")
        elif self.rc not in (0, 2, 4):  # interrupted, or ansible-playbook itself refused: not a finished run
            pass
        elif not self.check:
            out.append("nothing changed")
        elif self.clean:  # a check that stopped early cannot tell what the rest would change
            out.append("nothing would change")
        return out

    def outcome_lines(self) -> list[str]:
        """The summary with what the cluster's steps found (the RDMA readiness and the fabric)."""
        return self.lines(_rdma_lines(self) + _fabric_lines(self) + _models_lines(self))


def _fabric_lines(report) -> list[str]:
    # The publishing step carries the fabric's result with what the network step did; without it (the cables
    # checked alone, a run stopped before it), the fabric's own.
    fabric = report.result("mlx_fleet.cluster.fabric_publish") or report.result("mlx_fleet.cluster.fabric")
    if not fabric or fabric.get("skipped") or "reason" not in fabric:  # skipped, or failed before judging
        return []
    lines = []
    if fabric.get("backend"):
        lines.append(f"backend: {fabric['backend']} ({fabric.get('reason', '')})")
    else:
        lines.append(f"backend: none ({fabric.get('reason', '')})")
    if fabric.get("ip_pool_note"):  # the range chosen for the cables' addresses, when the inventory set none
        lines.append(f"addresses: {fabric['ip_pool_note']}")
    if fabric.get("bridges_off"):  # what the network step did (or would do), not a warning to act on
        lines.append(f"Thunderbolt Bridge: {'would turn' if report.check else 'turned'} off on "
                     f"{', '.join(fabric['bridges_off'])} (mlx_fabric_bridge: disabled; across the cables it breaks "
                     "RDMA setup)")
    # With no cable plan, the last converge's cables are the reference: what moved, said once.
    lines += [f"since the last converge: {change}" for change in fabric.get("changes") or []]
    # Its errors are the lines of its failure, which the summary prints first.
    hostfile = fabric.get("hostfile")
    if hostfile and not fabric.get("errors"):
        folder = Path(hostfile).parent
        written = [str(folder / n) for n in ("hostfile.json", "hostfile-ring.json") if (folder / n).exists()]
        # --check writes nothing: what is there is the last run's.
        last_run = " (the last run's; --check wrote none)" if report.check else ""
        if written:
            on_macs = f" (on every Mac in {fabric['hostfile_dir']})" if fabric.get("hostfile_dir") else ""
            lines.append(f"hostfiles{last_run}: {', '.join(written)}{on_macs}")
        if (folder / "fabric.svg").exists():
            lines.append(f"picture{last_run}: {folder / 'fabric.svg'}")
    return lines


def _rdma_lines(report) -> list[str]:
    rdma = report.result("mlx_fleet.cluster.rdma_readiness")
    if not rdma:
        return []
    # Each Mac enabled but not working is a warning of its own, which the summary prints after these lines.
    below = " (each says why in a warning below)" if rdma.get("enabled_not_working") else ""
    lines = [f"RDMA: {rdma['summary']}{below}"] if rdma.get("summary") else []
    if rdma.get("needs_recovery"):
        lines.append(f"to do at the rack: Recovery step for {', '.join(rdma['needs_recovery'])}; "
                     f"checklist {rdma['checklist']['html']} (text: {rdma['checklist']['text']})")
    return lines


def _models_lines(report) -> list[str]:
    """A converge's models still to copy (or to pin), each with its command: a line to act on, as a Recovery step
    is, not a failure."""
    status = report.result("mlx_fleet.cluster.models_status")
    lines = []
    for entry in (status or {}).get("to_do") or []:
        if entry.get("not_pinned"):
            lines.append(f"to do: model {entry['model']} is not pinned: {entry['command']}")
        else:
            lines.append(f"to do: model {entry['model']} is not on {', '.join(natural(entry['macs']))} "
                         f"({size(entry['bytes'])} to copy): {entry['command']}")
    return lines
