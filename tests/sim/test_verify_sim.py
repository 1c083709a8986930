"""`mlx-fleet verify` on simulated Macs: a converged 4-Mac ring passes with figures for every rank and
cable, a seeded task reproduces and a rank-count-dependent one does not, a wrong address set with
ifconfig fails naming the cable, and a jaccl mesh (no RDMA data path on Linux, as on a Mac whose RDMA
does not work) fails with MLX's own message while the ring passes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import RING
from simlib import BIN, REPO, Sim, converged, node_python, plan
from simlib import run_tool as run

pytestmark = pytest.mark.sim
MESH = ["vmesh-1", "vmesh-2", "vmesh-3"]
SIZES = "1KiB:4MiB"


def verify(sim: Sim, out: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    python, _ = node_python()
    done = run([str(BIN / "mlx-fleet"), "verify", "-i", str(sim.dir / "inventory.yml"), "--python", python,
                "--out", str(out), *args], timeout)
    assert (out / "verify.json").exists(), done.stdout + done.stderr
    return done, json.loads((out / "verify.json").read_text())


def by_name(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def test_a_converged_ring_passes_with_figures_and_the_seeded_task_reproduces(ring, tmp_path):
    done, report = verify(ring, tmp_path, "--sizes", SIZES, "--script", str(REPO / "examples/matrix_sum.py"),
                          "--repeat", "2", "--args", "--rows", "512", "--cols", "256")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["status"] == "passed" and report["level"] == "reproduces", report["level_reasons"]
    assert [(r["rank"], r["host"]) for r in report["cluster"]["ranks"]] == list(enumerate(RING))
    assert all(r["macos"] and r["mlx"] == "0.32.4" for r in report["cluster"]["ranks"])
    sizes = [1 << 10 << 2 * k for k in range(7)]  # 1 KiB .. 4 MiB
    all_sum = by_name(report, "all_sum")
    assert [f["bytes"] for f in all_sum["figures"]] == sizes and all(f["correct"] for f in all_sum["figures"])
    assert len(report["links"]) == 4
    for link in report["links"]:
        assert link["status"] == "passed" and link["latency_seconds"] > 0 and link["peak_bytes_per_s"] > 0
        ends = {(e["host"], e["port"]) for e in link["ends"]}
        assert link["cable"] == " -- ".join(f"{h}:{p}" for h, p in sorted(ends))
        assert all(e["device"] and e["address"].endswith("/30") for e in link["ends"])
    for check in report["checks"]:  # every rank's log is there to read
        assert check["status"] == "passed" and len(check["ranks"]) == len(check["hosts"])
        for rank in check["ranks"]:
            assert rank["outcome"] == "completed"
            assert (tmp_path / rank["log"]).read_text().startswith(f"# {check['name']}: rank {rank['rank']} on ")
    runs = report["script"]["runs"]
    assert [r["label"] for r in runs] == ["single Mac run 1", "single Mac run 2", "cluster run 1", "cluster run 2"]
    assert len(runs[2]["outputs"]) == 4 and all(c["agree"] for c in report["script"]["comparisons"])
    single, clustered = runs[0]["outputs"]["0"]["sum"], runs[2]["outputs"]["0"]["sum"]
    assert single == pytest.approx(512 * 256 / 2, rel=0.05) and clustered == pytest.approx(single, rel=1e-5)
    assert '<svg' in (tmp_path / "verify.html").read_text() and (tmp_path / "bandwidth.svg").exists()
    # the figures, for the closing note
    print("\nall_sum over 4 ranks (ring):")
    for f in all_sum["figures"]:
        print(f"  {f['bytes']:>8} B  {f['seconds'] * 1e3:8.2f} ms  bus {f['bus_bytes_per_s'] / 1e6:9.3f} MB/s")
    for link in report["links"]:
        check = by_name(report, f"link {link['cable']} ring")
        print(f"cable {link['cable']}: latency {link['latency_seconds'] * 1e6:.1f} us; "
              + ", ".join(f"{f['bytes']} B {f['bytes_per_s'] / 1e6:.1f} MB/s" for f in check["figures"]))


def test_a_task_whose_result_depends_on_the_rank_count_does_not_reproduce(ring, tmp_path):
    done, report = verify(ring, tmp_path, "--sizes", "1KiB", "--script",
                          str(Path(__file__).parent / "scripts/unsharded_sum.py"), "--repeat", "2")
    assert done.returncode == 1, done.stdout
    assert report["status"] == "failed" and report["level"] == "runs"
    against_single = [c for c in report["script"]["comparisons"] if "vs single Mac run 1" in c["what"]
                      and c["what"].startswith("cluster")]
    assert against_single and not any(c["agree"] for c in against_single)
    worst = against_single[0]["difference"]
    assert worst["got"] == pytest.approx(4 * worst["want"], rel=1e-5)  # four ranks, each summed everything
    assert f"{worst['got']!r} vs {worst['want']!r}" in done.stdout


def test_a_wrong_address_on_one_end_fails_naming_the_cable_and_stops_every_rank(changed_ring, tmp_path):
    ring = changed_ring
    cable = f"{RING[0]}:2 -- {RING[1]}:1"
    device = ring.device(RING[0], 2)
    ring.ssh(RING[0], f"sudo ifconfig {device} inet 192.168.250.1 netmask 255.255.255.252")
    done, report = verify(ring, tmp_path, "--sizes", "1KiB", "--timeout", "15")
    assert done.returncode == 1, done.stdout
    causes = [(f["cause"], f["cable"]) for f in report["findings"]]
    assert ("no-ipv4", cable) in causes, report["findings"]
    finding = next(f for f in report["findings"] if f["cable"] == cable)
    assert finding["hosts"] == [RING[0]] and "192.168.250.1/30" in finding["message"], finding
    assert f"cable {cable}" in done.stdout and "likely cause: no-ipv4" in done.stdout
    assert by_name(report, "all_sum")["status"] == "failed"
    assert by_name(report, f"link {cable} ring")["status"] == "failed"
    assert all(link["status"] == "passed" for link in report["links"] if link["cable"] != cable)
    # nothing of the run is left on the Macs: neither its folder nor a process working in it
    rundir = f".mlx-fleet-verify-{report['record']['run_id']}"
    for node in RING:
        assert ring.ssh(node, f"ls -d {rundir}", check=False).returncode != 0
        assert working_in(ring, node, rundir) == ""


def working_in(sim: Sim, node: str, folder: str) -> str:
    """The processes on node whose working folder's path has `folder` in it (the sim's /proc)."""
    found = sim.cli("exec", node, "--", "sh", "-c", f"for p in /proc/[0-9]*; do readlink $p/cwd; done | grep -F {folder}",
                    check=False)
    return found.stdout


def test_jaccl_on_a_mesh_fails_with_mlx_message_and_the_ring_passes(make_sim, tmp_path):
    cables = [f"{MESH[0]}:1 -- {MESH[1]}:1", f"{MESH[0]}:2 -- {MESH[2]}:1", f"{MESH[1]}:2 -- {MESH[2]}:2"]
    sim = converged(make_sim(topology=plan(tmp_path / "mesh.yml", MESH, cables), rdma="all"))
    done, report = verify(sim, tmp_path / "out", "--sizes", "1KiB:16KiB", "--timeout", "30")
    assert done.returncode == 1, done.stdout
    assert report["cluster"]["backend"] == "jaccl"
    assert (report["rdma"]["rdma"], report["rdma"]["tcp"]) == ("failed", "works") and report["rdma"]["statement"]
    assert report["rdma"]["statement"] in done.stdout.splitlines()[1]
    jaccl = by_name(report, "all_sum")
    failed = next(r for r in jaccl["ranks"] if r["error"])
    # MLX's own words, as the rank printed them in its log
    assert f"RuntimeError: {failed['error']}" in (tmp_path / "out" / failed["log"]).read_text()
    assert failed["host"] in jaccl["failures"][0] and "rdma_en" in jaccl["failures"][0], jaccl["failures"]
    assert by_name(report, "all_sum ring")["status"] == "passed"
    (finding,) = report["findings"]
    assert finding["cause"] == "rdma" and failed["error"] in finding["message"]
    assert all(link["status"] == "failed" and link["measured_with"] == "ring" for link in report["links"])


# What another account on the Mac does before a run: it owns the folders verify used to use (and a
# watcher that swaps in its own program wherever verify would stage), and keeps a process whose pid it
# lists where verify records the ranks it may have to kill.
PLANTED = """
exec </dev/null >/dev/null 2>&1  # nothing of its background processes holds the caller's pipes
mkdir -m 777 /tmp/mlx-fleet-verify
printf 'open("/tmp/planted-ran", "w").write("ran as the admin")\\n' > /tmp/planted.py
sleep 100000 & echo $! > /tmp/student-pids
for d in /tmp/mlx-fleet-verify-shared /tmp/.mlx-fleet-verify "$HOME/.mlx-fleet-verify"; do
  mkdir -p $d/running $d/script && cp /tmp/planted.py $d/check_program.py && echo $! > $d/running/all_sum.0
  chmod -R a+rwX $d
done
watch() {
  while :; do
    for d in /tmp/mlx-fleet-verify/*; do
      case $d in *.taken) continue;; esac
      [ -d "$d" ] || continue
      [ -O "$d" ] || { mv "$d" "$d.taken" && mkdir -m 777 "$d" "$d/running" "$d/output" "$d/script"; }
      cmp -s /tmp/planted.py "$d/check_program.py" || cp /tmp/planted.py "$d/check_program.py"
      chmod 666 "$d/check_program.py"
    done
    sleep 0.05
  done
}
watch &
echo $! >> /tmp/student-pids
"""


def test_another_account_on_the_mac_gets_none_of_its_code_run_and_keeps_its_processes(make_sim, tmp_path):
    names = ["vshare-1", "vshare-2"]
    sim = converged(make_sim(topology=plan(tmp_path / "pair.yml", names, [f"{names[0]}:1 -- {names[1]}:1"]),
                             rdma="none"))
    for node in names:
        sim.cli("exec", "--user", "student", node, "--", "sh", "-c", PLANTED)
    done, report = verify(sim, tmp_path / "out", "--sizes", "1KiB", "--timeout", "60")
    assert done.returncode == 0 and report["status"] == "passed", done.stdout + done.stderr
    for node in names:
        assert sim.ssh(node, "ls /tmp/planted-ran", check=False).returncode != 0, f"{node} ran the planted program"
        alive = sim.cli("exec", "--user", "student", node, "--", "sh", "-c", "kill -0 $(cat /tmp/student-pids)",
                        check=False)
        assert alive.returncode == 0, f"a process of the other account on {node} was killed"
        # its folders are as it left them, and nothing of the run is left in the admin's home
        assert sim.ssh(node, "ls /tmp/mlx-fleet-verify-shared/check_program.py").returncode == 0
        assert sim.ssh(node, "ls -d .mlx-fleet-verify-*", check=False).returncode != 0


def test_a_cable_out_fails_before_any_job_naming_both_ends(ring, tmp_path):
    cable = f"{RING[1]}:2 -- {RING[2]}:1"
    ring.cli("unplug", f"{RING[1]}:2")
    try:
        done, report = verify(ring, tmp_path, "--sizes", "1KiB")
    finally:
        ring.cli("plug", f"{RING[1]}:2", f"{RING[2]}:1")
    assert done.returncode == 1, done.stdout
    assert [(f["cause"], f["cable"]) for f in report["findings"]] == [("cable", cable)]
    assert sorted(report["findings"][0]["hosts"]) == RING[1:3], report["findings"]
    assert report["checks"] == []  # told from the ports before any job, not after one timed out
    assert f"cable {cable}" in done.stdout


def test_a_cable_moved_to_another_port_is_said_moved_as_the_converge_says_it(ring, tmp_path):
    """Not "the old port has no link, plug the cable in firmly": the cable's Macs link on other ports."""
    was = f"{RING[1]}:2 -- {RING[2]}:1"
    ring.cli("unplug", f"{RING[1]}:2")
    ring.cli("plug", f"{RING[1]}:3", f"{RING[2]}:1")
    try:
        done, report = verify(ring, tmp_path, "--sizes", "1KiB")
    finally:
        ring.cli("unplug", f"{RING[1]}:3")
        ring.cli("plug", f"{RING[1]}:2", f"{RING[2]}:1")
    assert done.returncode == 1, done.stdout
    assert [(f["cause"], f["cable"], f["hosts"]) for f in report["findings"]] == [("moved", was, RING[1:3])]
    assert report["checks"] == []  # told from the ports before any job
