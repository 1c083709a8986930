"""`mlx-fleet models sync`'s faults on 4 simulated Macs in a ring (the session's ring, conftest.models_ring; issue 28, "Bad input and faults"), each with the
exit status docs/models-on-macs.md gives it, a report naming the Mac and the file, and a rerun that copies only
what was missing: a cable pulled while the Macs copy, a Mac cut off from the controller while it copies, a Hub
download cut, a gated Hub model without a login, Macs short of space, and Ctrl-C. Models of a few MB, so each
sync is short. What a run did is read from its JSON events (ansible-runner's), never from its sentences."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from simlib import ModelsCluster, make_model, planned, received, sync_report

pytestmark = pytest.mark.sim

SHARDS = {f"model-0000{i}-of-00003.safetensors": 3 << 20 for i in (1, 2, 3)}
# Copies long enough (about 7 s per cable: 32 MiB over cables the sim holds to SLOW_MBIT) that a cable or a link
# pulled as the copy step starts (the sim's command takes seconds) goes while a Mac is receiving, or before it began:
# it fails either way.
LONG_SHARDS = {f"model-0000{i}-of-00004.safetensors": 8 << 20 for i in (1, 2, 3, 4)}
SLOW_MBIT = 40
FILES = sorted(["config.json", *SHARDS, "tokenizer.json"])
LONG_FILES = sorted(["config.json", *LONG_SHARDS, "tokenizer.json"])
GATED, CUT = "acme/gated", "acme/cut"
# A Hub download from the first byte of CUT's files stops here: past the 10 MiB huggingface_hub keeps of a cut
# download, so the next one resumes.
CUT_AFTER = 12 << 20
HUB_ARGS = ("--gated", GATED, "--cut", f"{CUT}={CUT_AFTER}")  # the Hub stand-in's faults (conftest.models_ring)


class Running:
    """`models sync NAMES` started in the background; returns once its copy step (model_copy) started."""

    def __init__(self, cluster: ModelsCluster, *names: str):
        self.cluster, self.before = cluster, cluster.runs()
        self.process = subprocess.Popen(cluster.argv("models", "sync", *names), env=cluster.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.process.stderr:
            # Not a terminal: a step's line is printed when the next one starts, so the token's line says that
            # model_copy, the step after it, started.
            if line.startswith("[") and "] The run's one-time token" in line:
                return
        raise AssertionError(f"the sync ended before it copied: {self.process.wait()}")

    def finish(self) -> tuple[int, dict[str, dict]]:
        """Its exit status and its run's results by action and host."""
        self.process.stderr.read()
        return self.process.wait(timeout=600), self.cluster.results(self.before)


def cables(cluster: ModelsCluster) -> list[list[str]]:
    """Each cable's two ends (NODE:PORT), from the cluster model."""
    return [link["cable"].split(" -- ")
            for link in json.loads((cluster.sim.dir / ".mlx-fleet" / "cluster.json").read_text())["links"]]


def cable_between(cluster: ModelsCluster, a: str, b: str) -> list[str]:
    """The two ends (NODE:PORT) of the cable between A and B."""
    for ends in cables(cluster):
        if sorted(end.split(":")[0] for end in ends) == sorted([a, b]):
            return ends
    raise AssertionError(f"no cable between {a} and {b}")


def replug(cluster: ModelsCluster, *rate: str) -> None:
    """Every cable pulled and plugged back in the same ports, with RATE (`--rate MBIT`) or at full speed."""
    for ends in cables(cluster):
        cluster.sim.cli("unplug", ends[0])
        cluster.sim.cli("plug", *ends, *rate)


def missing_everywhere(macs, model: str, files: list[str] = FILES) -> dict[str, list[str]]:
    return {mac: [f"{model}/{path}" for path in files] for mac in macs}


def rerun(cluster: ModelsCluster, name: str, missing: dict[str, list[str]], env: dict | None = None) -> dict:
    """A rerun of `models sync NAME`: exit 0, the Macs receive exactly MISSING (per Mac model/path); its report."""
    result, found = cluster.run("models", "sync", name, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert planned(found) == missing and received(found) == missing, found.get("mlx_fleet.cluster.model_copy")
    assert cluster.still_listening() == []
    return sync_report(found)


def wait_receiving(cluster: ModelsCluster, mac: str, model: str) -> None:
    """Until MAC holds a file of MODEL, whole or still arriving (its part of the sync runs)."""
    folder = cluster.held(mac, model)
    for _ in range(600):
        if folder.is_dir() and any(folder.iterdir()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{mac} received nothing of {model} within 60 s")


def failed_files(report: dict) -> dict[str, list[str]]:
    """Per Mac not done, the files the report names as not copied (model/path)."""
    return {row["mac"]: sorted(f"{f['model']}/{f['path']}" for f in row["failed"])
            for row in report["rows"] if not row["done"]}


def test_models_sync_faults_each_named_with_its_exit_status_and_a_rerun_resumes(models_ring):
    cluster, sim = models_ring, models_ring.sim
    macs = cluster.macs
    models = []
    for name in ("pulled", "cutoff", "big", "ctrlc"):
        make_model(sim.dir / "models-src" / name, LONG_SHARDS if name in ("pulled", "cutoff") else SHARDS)
        models.append({"name": name, "path": str(sim.dir / "models-src" / name)})
    for repo, size in ((GATED, 5 << 20), (CUT, 24 << 20)):
        make_model(sim.dir / "repos" / repo, {"model.safetensors": size})
        models.append({"name": repo.split("/")[1], "repo": repo, "revision": "main"})
    cluster.declare(models)
    result, _ = cluster.run("lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr

    # A cable pulled while the Macs copy: exit 1, the Mac behind it (and the Mac it feeds) named with each file
    # not copied; the others finish. Plugged back, a rerun copies to those Macs only.
    replug(cluster, "--rate", str(SLOW_MBIT))
    ends = cable_between(cluster, macs[0], macs[1])
    sync = Running(cluster, "pulled")
    sim.cli("unplug", ends[0])
    status, found = sync.finish()
    assert status == 1
    assert cluster.wait_nothing_listens() == []
    report = sync_report(found)
    behind = failed_files(report)
    assert macs[1] in behind and macs[0] not in behind, [(r["mac"], f["path"], f["from"], f["why"])
                                                         for r in report["rows"] for f in r["failed"]]
    assert all(files and set(files) <= {f"pulled/{path}" for path in LONG_FILES} for files in behind.values()), behind
    sim.cli("plug", *ends, "--rate", str(SLOW_MBIT))
    rerun(cluster, "pulled", behind)

    # A Mac cut off from the controller while it copies (its management link down once it receives, the Mac still on
    # and its cables up): exit 4, the Mac named as not answering; its link back, a rerun copies what it still lacks,
    # to it only.
    sync = Running(cluster, "cutoff")
    wait_receiving(cluster, macs[2], "cutoff")
    sim.cli("link", macs[2], "down")
    status, found = sync.finish()
    assert status == 4
    sim.cli("link", macs[2], "up")
    assert cluster.wait_nothing_listens() == []
    report = sync_report(found)
    assert [row["mac"] for row in report["rows"] if not row["done"]] == [macs[2]], report
    result, found = cluster.run("models", "sync", "cutoff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(received(found)) <= {macs[2]} and planned(found) == received(found)
    replug(cluster)

    # A gated Hub model without a login: exit 1 before any byte moves, the model named; with a token (as after
    # `hf auth login`) a rerun copies it to every Mac.
    result, found = cluster.run("models", "sync", "gated")
    assert result.returncode == 1, result.stdout + result.stderr
    (refused,) = found["mlx_fleet.cluster.models_sync_plan"].values()
    assert "plan" not in refused and "mlx_fleet.cluster.model_copy" not in found
    assert GATED in refused["msg"] and "hf auth login" in refused["msg"]  # the repo and the command to run
    assert not any(cluster.hub_cache(mac).joinpath("models--acme--gated").exists() for mac in macs)
    hub_files = ["config.json", "model.safetensors", "tokenizer.json"]
    rerun(cluster, "gated", {mac: [f"gated/{path}" for path in hub_files] for mac in macs},
          env=dict(cluster.env, HF_TOKEN="hf_rehearsal"))

    # A Hub download cut past its first 10 MiB: huggingface_hub resumes it from what it kept (a Range request,
    # answered 206), the model is fetched once and the sync completes (exit 0).
    rerun(cluster, "cut", {mac: [f"cut/{path}" for path in hub_files] for mac in macs})
    requests = (sim.dir / "hub.log").read_text().splitlines()
    assert any("acme/cut/" in line and " 206 " in line for line in requests), requests[-20:]

    # Two Macs short of space: exit 1, both named with the bytes needed and free, and not a byte moves on any Mac.
    pids = {mac: str(sim.state()["nodes"][mac]["pid"]) for mac in (macs[1], macs[3])}
    for mac, pid in pids.items():
        cluster.held(mac, "big").mkdir()
        subprocess.run(["nsenter", "-t", pid, "-m", "mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                        "/opt/mlx-fleet/models/big"], check=True)
    result, found = cluster.run("models", "sync", "big")
    assert result.returncode == 1, result.stdout + result.stderr
    (refused,) = found["mlx_fleet.cluster.models_sync_plan"].values()
    assert sorted((e["mac"], e["free"]) for e in refused["short_of_space"]) == [(macs[1], 4 << 20), (macs[3], 4 << 20)]
    assert "mlx_fleet.cluster.model_copy" not in found
    assert not any(cluster.held(mac, "big").exists() and any(cluster.held(mac, "big").iterdir()) for mac in macs)
    for pid in pids.values():
        subprocess.run(["nsenter", "-t", pid, "-m", "umount", "/opt/mlx-fleet/models/big"], check=True)
    rerun(cluster, "big", missing_everywhere(macs, "big"))

    # Ctrl-C once the first Mac holds a file: exit 130, every Mac's part ends on its own (nothing listens), no file
    # under its final name fails its hash; a rerun copies only what had not arrived.
    sync = Running(cluster, "ctrlc")
    for _ in range(600):
        if cluster.held(macs[0], "ctrlc").is_dir() and any(
                not p.name.startswith(".") for p in cluster.held(macs[0], "ctrlc").iterdir()):
            break
        time.sleep(0.1)
    sync.process.send_signal(signal.SIGINT)
    status, _ = sync.finish()
    assert status == 130
    assert cluster.wait_nothing_listens() == []
    result, found = cluster.run("models", "status", "--deep")
    (status_report,) = [res["report"] for res in found["mlx_fleet.cluster.models_status"].values()]
    assert [row["mac"] for row in status_report["rows"] if row["differing"]] == []  # no file half-written
    missing = {row["mac"]: sorted(f"ctrlc/{path}" for path in row["missing"])
               for row in status_report["rows"] if row["model"] == "ctrlc" and row["missing"]}
    assert missing != missing_everywhere(macs, "ctrlc"), "something had arrived before Ctrl-C"
    rerun(cluster, "ctrlc", missing)
