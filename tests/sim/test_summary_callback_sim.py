"""Plain `ansible-playbook site.yml` (no CLI) ends with the summary the CLI prints, from the collection's
callback plugin (mlx_fleet.cluster.summary, enabled in the repository's ansible.cfg)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from simlib import BIN, mlx_fleet

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
BANNER = "MLX FLEET SUMMARY"
# The lines both print from the same task results (the CLI adds the run log and the exit status).
SHARED = ("RDMA: ", "to do at the rack: ", "backend: ", "hostfiles: ", "picture: ")


def _after_banner(output: str) -> list[str]:
    assert BANNER in output, output[-4000:]
    tail = output.rsplit(BANNER, 1)[1].splitlines()[1:]
    return [line for line in tail if line.strip()]


def test_ansible_playbook_site_ends_with_the_summary_the_cli_prints(make_sim, tmp_path):
    sim = make_sim(nodes=2, topology="mesh", rdma="mini-1")
    assert sim.nodes == ["mini-1", "mini-2"]
    out = tmp_path / "out"
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"),
                          "-e", f"mlx_fleet_output_dir={out}", str(REPO / "site.yml")],
                         capture_output=True, text=True, env=env, timeout=900, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-4000:]
    lines = _after_banner(run.stdout)
    # After the recap: nothing else follows the summary.
    assert run.stdout.index("PLAY RECAP") < run.stdout.rindex(BANNER)
    by_start = {start: [line for line in lines if line.startswith(start)] for start in SHARED}
    assert by_start["backend: "] and by_start["backend: "][0].startswith("backend: ring ("), lines
    # One line naming each hostfile written (the ring's when there is one) and the Macs' folder.
    (hostfiles,) = by_start["hostfiles: "]
    ring = out / "hostfile-ring.json"
    assert (out / "hostfile.json").is_file() and str(out / "hostfile.json") in hostfiles, lines
    assert (str(ring) in hostfiles) == ring.is_file() and "/opt/mlx-fleet)" in hostfiles.split(), lines
    # One line for the rack: the Mac that needs the Recovery step (mini-2: RDMA on mini-1 only), both checklists.
    (rack,) = by_start["to do at the rack: "]
    checklists = [out / "recovery-checklist.html", out / "recovery-checklist.txt"]
    assert "mini-2;" in rack.split() and "mini-1" not in rack and all(
        path.is_file() and str(path) in rack for path in checklists), lines
    assert lines[-1] == "changed: mini-1, mini-2", lines

    # The CLI, on the same cluster, prints the same lines; under the CLI the callback's summary goes to the run
    # log, with the rest of ansible-playbook's output, and reads as the CLI's but for the CLI's own last two lines.
    cli = mlx_fleet("converge", "-i", str(sim.dir / "inventory.yml"), "--output-dir", str(out), check=False,
                    timeout=900)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    cli_lines = cli.stdout.splitlines()
    assert {s: [line for line in cli_lines if line.startswith(s)] for s in SHARED} == by_start, cli.stdout
    assert cli_lines[-2].startswith("full output: ") and cli_lines[-1] == "result: ok", cli_lines
    log = cli_lines[-2].split(": ", 1)[1].rsplit(" (", 1)[0]
    assert _after_banner(Path(log).read_text()) == cli_lines[:-2]
