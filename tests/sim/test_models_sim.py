"""Every Mac model, and RDMA tool output no real Mac has shown, on simulated Macs (issue 20).

A Mac Studio M4 Max, an M2 Ultra Mac Studio (Thunderbolt 4: ring, never sent to Recovery) and an M5 Max
MacBook Pro converge with their models declared and again with none declared (the Macs' own facts are
read); a declared model the Mac contradicts is one line, exit 2, no Mac changed, in `converge` and in
`hostfile`. A Mac whose `rdma_ctl status` prints a wording no real Mac has shown converges: the summary
warns, naming it, and it is not failed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simlib import converge, lines, mlx_fleet_packaged, plan_file, runner_events

pytestmark = pytest.mark.sim

# Names no other test's cluster uses (plain `ssh NAME` answers the first cluster up with that name).
LAB = {"cat-max": "studio-m4-max", "cat-ultra": "studio-m2-ultra", "cat-mbp": "macbook-pro-m5-max"}
# A ring, cat-max's Thunderbolt 1 (beside Ethernet) left free.
LAB_CABLES = ["cat-max:2 -- cat-ultra:1", "cat-max:3 -- cat-mbp:1", "cat-ultra:2 -- cat-mbp:2"]


def inventory_variant(sim, path: Path, models: dict[str, str | None]) -> Path:
    """The sim's inventory with mlx_fleet_model set (or removed, for None) per host; host order kept."""
    data = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    hosts = data["all"]["children"]["mlx_cluster"]["hosts"]
    for host, key in models.items():
        hosts[host] = {k: v for k, v in (hosts[host] or {}).items() if k != "mlx_fleet_model"}
        if key:
            hosts[host]["mlx_fleet_model"] = key
    data["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_output_dir"] = str(sim.dir / ".mlx-fleet")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def rdma_judged(result) -> dict:
    """What the run's RDMA readiness step judged (its result, from the run's events): each Mac's status, and the
    Macs that need the Recovery step, cannot do RDMA, are ready."""
    (judged,) = [event["res"] for event in runner_events(result, "runner_on_ok") if "needs_recovery" in event["res"]]
    return {key: judged[key] for key in ("needs_recovery", "not_capable", "ready")} | {
        "status": {host: node["status"] for host, node in judged["nodes"].items()}}


def test_m4_max_studio_m2_ultra_studio_and_m5_max_macbook_pro_with_and_without_their_models(make_sim, tmp_path):
    plan = tmp_path / "plan.yml"  # RDMA off on the M2 Ultra: still no Recovery visit for it
    plan.write_text(yaml.safe_dump({"nodes": {n: {"model": m, "rdma": n != "cat-ultra"} for n, m in LAB.items()},
                                    "cables": LAB_CABLES}, sort_keys=False))
    sim = make_sim(topology=str(plan))
    assert [sim.profile(n)["model_id"] for n in LAB] == ["Mac16,9", "Mac14,14", "Mac17,7"]
    assert sim.cli("exec", "cat-ultra", "--", "rdma_ctl", "status").stdout == "disabled\n"
    assert sim.inventory["all"]["children"]["mlx_cluster"]["hosts"]["cat-ultra"] == {"mlx_fleet_model": "studio-m2-ultra"}
    # cat-ultra (Thunderbolt 4) cannot do RDMA: no Recovery step for anyone, and the ring backend.
    judged = {"needs_recovery": [], "not_capable": ["cat-ultra"], "ready": ["cat-max", "cat-mbp"],
              "status": {"cat-max": "ready", "cat-ultra": "not_capable", "cat-mbp": "ready"}}
    model_file = sim.dir / ".mlx-fleet" / "cluster.json"

    declared = converge(sim.dir / "inventory.yml")
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert rdma_judged(declared) == judged and json.loads(model_file.read_text())["backend"] == "ring"
    assert [line.split(": ")[0] for line in lines(declared, "backend: ", "RDMA: ")] == ["RDMA", "backend"]
    checklist = (sim.dir / ".mlx-fleet" / "recovery-checklist.txt").read_text()
    # cat-ultra, RDMA off, is not sent there: the checklist has no sheet, no "Mac:" of one.
    assert not [line for line in checklist.splitlines() if line.startswith("Mac:")], checklist

    # The same Macs with no mlx_fleet_model: placed by their model identifiers, the same judgment.
    undeclared = converge(inventory_variant(sim, tmp_path / "undeclared.yml", dict.fromkeys(LAB)))
    assert undeclared.returncode == 0, undeclared.stdout + undeclared.stderr
    assert rdma_judged(undeclared) == judged and json.loads(model_file.read_text())["backend"] == "ring"
    assert not lines(undeclared, "changed: "), undeclared.stdout  # nothing to redo: the same cluster

    # The M2 Ultra declared as an M4 Max: one line, bad input, no Mac changed.
    wrong_inventory = inventory_variant(sim, tmp_path / "wrong.yml", dict(LAB, **{"cat-ultra": "studio-m4-max"}))
    hostfile = (sim.dir / ".mlx-fleet" / "hostfile.json").read_text()
    # mlx-fleet hostfile too: a fabric judged on an M4 Max's ports (its port 1 beside Ethernet) would be wrong.
    for wrong in (converge(wrong_inventory), mlx_fleet_packaged("hostfile", "-i", str(wrong_inventory))):
        assert wrong.returncode == 2, wrong.stdout + wrong.stderr
        # One error: the Mac, and the key that fits it; nothing failed or changed.
        (error,) = lines(wrong, "error: ", "failed: ", "changed: ")
        assert error.startswith("error: cat-ultra: ") and "mlx_fleet_model: studio-m2-ultra" in error, wrong.stdout
        assert [line.endswith("(exit 2)") for line in lines(wrong, "result: ")] == [True]
    assert (sim.dir / ".mlx-fleet" / "hostfile.json").read_text() == hostfile


def test_an_rdma_ctl_wording_never_seen_warns_and_the_mac_converges(make_sim, tmp_path):
    sim = make_sim(topology=plan_file(tmp_path / "plan.yml", {"uw-1": "mini-m4-pro", "uw-2": "mini-m4-pro"},
                                      ["uw-1:1 -- uw-2:1"]))
    sim.cli("set", "uw-2", "rdma_ctl_status_output=RDMA over Thunderbolt: on")
    assert sim.cli("exec", "uw-2", "--", "rdma_ctl", "status").stdout == "RDMA over Thunderbolt: on\n"

    result = converge(sim.dir / "inventory.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    # One warning naming the Mac, the command and its output quoted; the Mac judged ready by its devices.
    (warning,) = [line for line in lines(result, "warning: ") if "rdma_ctl" in line]
    assert warning.startswith("warning: uw-2: rdma_ctl status ") and repr("RDMA over Thunderbolt: on") in warning
    assert rdma_judged(result)["status"] == {"uw-1": "ready", "uw-2": "ready"}
    assert not lines(result, "failed: ", "error: "), result.stdout
    # The Mac is judged by its RDMA devices, as MLX does: ready, so the cable carries JACCL.
    (backend,) = lines(result, "backend: ")
    assert backend.startswith("backend: jaccl"), result.stdout
