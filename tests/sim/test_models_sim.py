"""Every Mac model, and RDMA tool output no real Mac has shown, on simulated Macs (issue 20).

A Mac Studio M4 Max, an M2 Ultra Mac Studio (Thunderbolt 4: ring, never sent to Recovery) and an M5 Max
MacBook Pro converge with their models declared and again with none declared (the Macs' own facts are
read); a declared model the Mac contradicts is one line, exit 2, no Mac changed, in `converge` and in
`hostfile`. A Mac whose `rdma_ctl status` prints a wording no real Mac has shown converges: the summary
warns, naming it, and it is not failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simlib import converge, lines, mlx_fleet_packaged, plan_file

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


def test_m4_max_studio_m2_ultra_studio_and_m5_max_macbook_pro_with_and_without_their_models(make_sim, tmp_path):
    plan = tmp_path / "plan.yml"  # RDMA off on the M2 Ultra: still no Recovery visit for it
    plan.write_text(yaml.safe_dump({"nodes": {n: {"model": m, "rdma": n != "cat-ultra"} for n, m in LAB.items()},
                                    "cables": LAB_CABLES}, sort_keys=False))
    sim = make_sim(topology=str(plan))
    assert [sim.profile(n)["model_id"] for n in LAB] == ["Mac16,9", "Mac14,14", "Mac17,7"]
    assert sim.cli("exec", "cat-ultra", "--", "rdma_ctl", "status").stdout == "disabled\n"
    assert sim.inventory["all"]["children"]["mlx_cluster"]["hosts"]["cat-ultra"] == {"mlx_fleet_model": "studio-m2-ultra"}
    ring = ("backend: ring (auto chose ring: the cables form a ring (cat-max -> cat-ultra -> cat-mbp) but cat-ultra "
            "cannot do RDMA (a Thunderbolt 4 Mac))")
    rdma = ("RDMA: no Mac needs the Recovery step; the cabling supports ring (no RDMA); cat-ultra cannot do RDMA, "
            "so ring is the way for it")

    declared = converge(sim.dir / "inventory.yml")
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert lines(declared, "backend: ", "RDMA: ") == [rdma, ring], declared.stdout
    checklist = (sim.dir / ".mlx-fleet" / "recovery-checklist.txt").read_text()
    assert "No Mac needs the Recovery step." in checklist, checklist  # cat-ultra, RDMA off, is not sent there

    # The same Macs with no mlx_fleet_model: placed by their model identifiers, the same judgment.
    undeclared = converge(inventory_variant(sim, tmp_path / "undeclared.yml", dict.fromkeys(LAB)))
    assert undeclared.returncode == 0, undeclared.stdout + undeclared.stderr
    assert lines(undeclared, "backend: ", "RDMA: ") == [rdma, ring], undeclared.stdout
    assert not lines(undeclared, "changed: "), undeclared.stdout  # nothing to redo: the same cluster

    # The M2 Ultra declared as an M4 Max: one line, bad input, no Mac changed.
    wrong_inventory = inventory_variant(sim, tmp_path / "wrong.yml", dict(LAB, **{"cat-ultra": "studio-m4-max"}))
    hostfile = (sim.dir / ".mlx-fleet" / "hostfile.json").read_text()
    # mlx-fleet hostfile too: a fabric judged on an M4 Max's ports (its port 1 beside Ethernet) would be wrong.
    for wrong in (converge(wrong_inventory), mlx_fleet_packaged("hostfile", "-i", str(wrong_inventory))):
        assert wrong.returncode == 2, wrong.stdout + wrong.stderr
        assert lines(wrong, "error: ", "failed: ", "changed: ") == [
            "error: cat-ultra: mlx_fleet_model says studio-m4-max (Mac Studio, Apple M4 Max) but the Mac is a Mac "
            "Studio (Mac14,14, Apple M2 Ultra); set mlx_fleet_model: studio-m2-ultra, or check that the inventory "
            "names the right Mac"], wrong.stdout
        assert lines(wrong, "result: ") == ["result: fix the input above (exit 2)"]
    assert (sim.dir / ".mlx-fleet" / "hostfile.json").read_text() == hostfile


def test_an_rdma_ctl_wording_never_seen_warns_and_the_mac_converges(make_sim, tmp_path):
    sim = make_sim(topology=plan_file(tmp_path / "plan.yml", {"uw-1": "mini-m4-pro", "uw-2": "mini-m4-pro"},
                                      ["uw-1:1 -- uw-2:1"]))
    sim.cli("set", "uw-2", "rdma_ctl_status_output=RDMA over Thunderbolt: on")
    assert sim.cli("exec", "uw-2", "--", "rdma_ctl", "status").stdout == "RDMA over Thunderbolt: on\n"

    result = converge(sim.dir / "inventory.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line for line in lines(result, "warning: ") if "rdma_ctl" in line] == [
        "warning: uw-2: rdma_ctl status printed 'RDMA over Thunderbolt: on', a wording no real Mac has shown; RDMA "
        "state unknown, judged by the rdma_* devices ibv_devices lists (rdma_en2, rdma_en3, rdma_en4): ready"
    ], result.stdout
    assert not lines(result, "failed: ", "error: "), result.stdout
    # The Mac is judged by its RDMA devices, as MLX does: ready, so the cable carries JACCL.
    (backend,) = lines(result, "backend: ")
    assert backend.startswith("backend: jaccl"), result.stdout
