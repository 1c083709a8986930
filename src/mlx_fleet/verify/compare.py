"""The user's task (`--script`): its JSON output, compared run against run and cluster against one Mac,
and the acceptance level the evidence supports.

Levels (docs/verify.md): "runs" — the configuration completed a small task and every rank's log is
there to read; "reproduces" — repeated runs agree within the stated tolerance, and with the
single-Mac baseline; "deliverable" needs what only people provide (``DELIVERABLE``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

RUNS, REPRODUCES = "runs", "reproduces"
DELIVERABLE = (
    ("owner", "An owner: the person who answers for this cluster's results"),
    ("data", "Data handling approved for the data this cluster will see"),
    ("restore", "Checkpoint restore tested: a saved checkpoint loaded back and its result compared"),
    ("record", "This record kept: verify.json, verify.html and logs/ filed where the lab keeps records"),
)


def result_of(lines: list[str]):
    """The last line the script printed that is JSON made of numbers, arrays and objects; None if none."""
    for text in reversed(lines):
        text = text.strip()
        if not text or text[0] not in "[{-0123456789":
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if _numeric(value):
            return value
    return None


def _numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, list):
        return all(_numeric(v) for v in value)
    if isinstance(value, dict):
        return bool(value) and all(_numeric(v) for v in value.values())
    return False


@dataclass
class Difference:
    path: str  # where in the output: $, $[3], $.loss[0][2]
    got: object
    want: object
    message: str
    count: int = 1  # elements out of tolerance (1 for a difference of shape)

    def to_dict(self) -> dict:
        return asdict(self)


def _leaves(value, path: str = "$"):
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}")
    else:
        yield path, value


def _shape(value):
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return 0


def compare(got, want, rtol: float, atol: float) -> Difference | None:
    """None when got is within |got - want| <= atol + rtol * |want| of want everywhere (NaN matches
    NaN); else the worst element, with how many are out of tolerance."""
    if _shape(got) != _shape(want):
        return Difference("$", _brief(got), _brief(want), "the outputs differ in shape")
    worst, excess, count = None, -math.inf, 0
    for (path, a), (_, b) in zip(_leaves(got), _leaves(want)):
        if math.isnan(a) and math.isnan(b):
            continue
        allowed = atol + rtol * abs(b)
        diff = abs(a - b)
        if math.isnan(diff) or diff > allowed:
            count += 1
            over = math.inf if math.isnan(diff) else diff - allowed
            if over > excess:
                excess = over
                worst = Difference(path, a, b, f"{path}: {a!r} vs {b!r}, difference {diff:.6g} > allowed {allowed:.6g} "
                                               f"(atol {atol:g} + rtol {rtol:g} x {abs(b):.6g})")
    if worst is not None:
        worst.count = count
    return worst


def _brief(value) -> object:
    text = json.dumps(value)
    return value if len(text) <= 200 else text[:197] + "..."


@dataclass
class Run:
    """One run of the script: on one Mac or the cluster; outputs by rank (None: printed no JSON)."""

    label: str  # "single Mac run 1", "cluster run 2"
    completed: bool  # every rank exited 0
    outputs: dict[int, object]
    problem: str = ""  # why it did not complete, from the ranks


@dataclass
class Comparison:
    what: str  # "cluster run 2, rank 1 vs single Mac run 1"
    difference: Difference | None

    def to_dict(self) -> dict:
        return {"what": self.what, "agree": self.difference is None,
                "difference": self.difference.to_dict() if self.difference else None}


def comparisons(single: list[Run], cluster: list[Run], rtol: float, atol: float) -> list[Comparison]:
    """Every run against the first of its kind (repeatability), every cluster rank's output against
    the single-Mac baseline."""
    found = []
    reference = single[0].outputs.get(0) if single else None
    for runs, name in ((single, "single Mac"), (cluster, "cluster")):
        first = runs[0] if runs else None
        for run in runs[1:]:
            for rank, value in sorted(run.outputs.items()):
                if value is not None and first and first.outputs.get(rank) is not None:
                    found.append(Comparison(f"{run.label}, rank {rank} vs {first.label}",
                                            compare(value, first.outputs[rank], rtol, atol)))
    if reference is not None:
        for run in cluster:
            for rank, value in sorted(run.outputs.items()):
                if value is not None:
                    found.append(Comparison(f"{run.label}, rank {rank} vs {single[0].label}",
                                            compare(value, reference, rtol, atol)))
    return found


@dataclass(frozen=True)
class Reason:
    """Why the level is what it is, as data (verify.report says it). ``kind``: "check-failed", "checks-ran",
    "needs-script", "incomplete" (``run`` did not complete: ``problem``), "no-result" (``run`` printed no JSON),
    "no-baseline", "disagree" (its ``comparison``), "needs-repeat", "agree" (``cluster_runs`` and ``single_runs``
    agree over ``comparisons``)."""

    kind: str
    run: str = ""
    problem: str = ""
    comparison: Comparison | None = None
    cluster_runs: int = 0
    single_runs: int = 0
    comparisons: int = 0


def level(checks_passed: bool, single: list[Run], cluster: list[Run], found: list[Comparison],
          scripted: bool) -> tuple[str | None, list[Reason]]:
    """The acceptance level reached and why."""
    if not checks_passed:
        return None, [Reason("check-failed")]
    if not scripted:
        return RUNS, [Reason("checks-ran"), Reason("needs-script")]
    why = []
    for run in single + cluster:
        if not run.completed:
            why.append(Reason("incomplete", run.label, run.problem))
        elif not any(v is not None for v in run.outputs.values()):
            why.append(Reason("no-result", run.label))
    if why:
        return None, why
    if single[0].outputs.get(0) is None:
        return RUNS, [Reason("no-baseline")]
    disagree = [c for c in found if c.difference is not None]
    if disagree:
        return RUNS, [Reason("disagree", comparison=c) for c in disagree]
    if len(cluster) < 2:
        return RUNS, [Reason("needs-repeat")]
    return REPRODUCES, [Reason("agree", cluster_runs=len(cluster), single_runs=len(single), comparisons=len(found))]
