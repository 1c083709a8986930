"""`mlx-fleet sim hub`: the Hub stand-in of a running cluster answers at the address it prints, from the controller
and from a simulated Mac (an LFS file through its 302 to the storage port), and `sim down` ends it, its ports free."""

from __future__ import annotations

import hashlib
import json
import subprocess
import urllib.request
import pytest

from mlx_fleet.sim.lifecycle import process_alive
from simlib import Sim

pytestmark = pytest.mark.sim

FETCH = """
import hashlib, json, sys, urllib.request
endpoint = sys.argv[1]
info = json.load(urllib.request.urlopen(endpoint + "/api/models/acme/tiny/revision/main?blobs=true", timeout=10))
weights = urllib.request.urlopen(endpoint + "/acme/tiny/resolve/main/model.safetensors", timeout=10).read()
print(json.dumps([info["sha"], hashlib.sha256(weights).hexdigest()]))
"""


def test_a_mac_and_the_controller_reach_the_stand_in_and_sim_down_ends_it(tmp_path):
    sim = Sim(nodes=1)
    try:
        repos = sim.dir / "repos"
        (repos / "acme" / "tiny").mkdir(parents=True)
        (repos / "acme" / "tiny" / "model.safetensors").write_bytes(b"\7" * 100_000)
        served = sim.cli("hub", "serve", str(repos)).stdout
        endpoint = next(line.split("=", 1)[1] for line in served.splitlines() if line.startswith("HF_ENDPOINT="))
        running = json.loads((sim.dir / "hub.json").read_text())
        assert endpoint == running["endpoint"] and endpoint.startswith(f"http://10.213.{sim.state()['index']}.1:")

        on_mac = sim.cli("exec", sim.nodes[0], "--", "python3", "-c", FETCH, endpoint).stdout
        commit, sha256 = json.loads(on_mac)
        assert sha256 == hashlib.sha256(b"\7" * 100_000).hexdigest()
        with urllib.request.urlopen(f"{endpoint}/api/models/acme/tiny", timeout=10) as answer:
            assert json.load(answer)["sha"] == commit

        sim.cli("down")
        assert not process_alive(running["pid"])  # ended (a zombie until init reaps it)
        ports = [url.rsplit(":", 1)[1] for url in (running["endpoint"], running["storage"])]
        listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=True).stdout
        assert [p for p in ports if f":{p} " in listening] == []
    finally:
        sim.down()
