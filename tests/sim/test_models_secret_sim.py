"""The models sync's one-time token stays out of every log (issue 28): a sync on 4 simulated Macs in a ring (the
session's ring, conftest.models_ring: the cables' addresses in the cluster model), the token caught
on the wire (the receivers show it to their senders: a sniffer in each Mac's network namespace), then looked for in
the run's whole folder under OUTPUT_DIR/runs (ansible-runner's events, stdout, artifacts), the output folder and the
controller's own output. The model is a few MB so the run stays short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from simlib import MLX_FLEET

pytestmark = pytest.mark.sim

SNIFFER = Path(__file__).parent / "scripts" / "stream_tokens.py"


def make_model(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(3 << 20))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))


def files_holding(folder: Path, secrets: set[str]) -> list[str]:
    """The files under FOLDER whose bytes hold any of SECRETS."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(secret.encode() in data for secret in secrets):
                found.append(str(path.relative_to(folder)))
    return found


def test_the_sync_token_is_in_no_log_event_or_file(models_ring):
    sim = models_ring.sim
    source = sim.dir / "models-src" / "tiny"
    make_model(source)
    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_models"] = [{"name": "tiny", "path": str(source)}]
    (sim.dir / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    argv = [MLX_FLEET, "-i", str(sim.dir / "inventory.yml")]
    state = sim.state()
    sniffers = []
    for mac in sim.nodes:
        out = sim.dir / f"tokens-{mac}.txt"
        sniffers.append((out, subprocess.Popen(["ip", "netns", "exec", f"mfs{state['index']}-{mac}", sys.executable,
                                                str(SNIFFER), str(out), "300"])))
    for out, _ in sniffers:
        for _ in range(100):
            if out.exists() and out.read_text().startswith("listening"):
                break
            time.sleep(0.1)
    done = subprocess.run([argv[0], "models", "sync", *argv[1:]], capture_output=True, text=True, timeout=600)
    for _, sniffer in sniffers:
        sniffer.kill()
        sniffer.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    tokens = {line for out, _ in sniffers for line in out.read_text().splitlines()[1:]}
    # Every copy showed the run's one token: the controller's feed of the first Mac, each Mac's of the next.
    assert len(tokens) == 1, tokens

    assert [t for t in tokens if t in done.stdout + done.stderr] == []
    assert files_holding(sim.dir / ".mlx-fleet", tokens) == []  # the runs (events, stdout, artifacts) and records
