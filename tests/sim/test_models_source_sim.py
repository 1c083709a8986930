"""`mlx_fleet_models_source` on 4 simulated Macs in a ring (issue 28; the session's ring, conftest.models_ring): a Hub
entry fetched through the sim's Hub stand-in by vring-2 with the huggingface_hub of the cluster's environment (a
venv holding the environment lock's huggingface_hub, made from the env tests' warm wheel cache), then spread over
the cables. The controller's Hugging Face cache gets nothing, the stand-in's log shows every download came from
vring-2's address, every Mac ends with the pinned bytes, a second sync copies nothing; a gated entry without a
token fails on vring-2 as the Hub's refusal; with the user's token (HF_TOKEN on the controller) it is fetched, and
the token is in no file of the controller's cluster folder or of any Mac, and in no process's argv listed during
the run. A name not of the cluster is refused (exit 2). Reports are read from the run's own JSON events."""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import pytest

from simlib import ENV_CACHE, Ps, make_model, received, sync_plan, sync_report

pytestmark = pytest.mark.sim

REPO, GATED = "acme/tiny-src", "acme/gated-src"
HUB_ARGS = ("--gated", GATED)  # the Hub stand-in's faults (conftest.models_ring)
SOURCE = "vring-2"
ENV = "/opt/mlx-fleet/venv"  # mlx_env_path's default


def environment_with_huggingface_hub(sim, mac: str) -> None:
    """MAC's environment as the env step leaves it, for what the fetch needs: a venv holding the huggingface_hub the
    cluster's environment lock pins (and its dependencies), from the env tests' warm wheel cache, offline."""
    lock = json.loads((sim.dir / "mlx-env.lock.json").read_text())
    version = next(p["version"] for p in lock["packages"] if p["name"] == "huggingface-hub")
    sim.cli("exec", mac, "--", "sh", "-c",
            f"rm -rf {ENV} && /usr/bin/python3 -m venv {ENV} && {ENV}/bin/python -m pip install -q --no-index "
            f"--disable-pip-version-check --find-links {ENV_CACHE}/artifacts huggingface_hub=={version}")


def blob_digest(path: Path, pinned: dict) -> bool:
    data = path.read_bytes()
    if "sha256" in pinned:
        return hashlib.sha256(data).hexdigest() == pinned["sha256"]
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest() == pinned["git_sha1"]


def hub_requests(sim, since: int) -> list[list[str]]:
    """The stand-in's log lines after the first SINCE, each as its words (client, method, path, status, ...)."""
    return [line.split() for line in (sim.dir / "hub.log").read_text().splitlines()[since:]]


def logged(sim) -> int:
    log = sim.dir / "hub.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def files_holding(sim, secret: str) -> list[str]:
    """The files holding SECRET in the cluster's folder (the controller's: inventory, locks, the runs' events and
    artifacts; every Mac's disk under nodes/), its snapshots left out (taken before), and in Ansible's own folder."""
    folders = [path for path in sim.dir.iterdir() if path.name != "snapshots"] + [Path.home() / ".ansible"]
    found = []
    for path in (p for folder in folders for p in ([folder] if folder.is_file() else folder.rglob("*"))):
        try:
            if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes():
                found.append(str(path))
        except OSError:
            pass  # gone meanwhile (another run's temporary file)
    return found


def test_a_mac_fetches_the_hub_entry_the_controller_nothing_and_the_cables_spread_it(models_ring):
    cluster, sim = models_ring, models_ring.sim
    macs = cluster.macs
    controller_cache = Path(cluster.env["HF_HUB_CACHE"])
    environment_with_huggingface_hub(sim, SOURCE)
    hub_bytes = make_model(sim.dir / "repos" / REPO, {"model.safetensors": 12 << 20})
    make_model(sim.dir / "repos" / GATED, {"model.safetensors": 1 << 20})
    declared = [{"name": "tiny-src", "repo": REPO, "revision": "main"}]

    # A source that is not a Mac of the cluster: bad input, one line naming it; nothing runs on a Mac.
    cluster.cluster_vars["mlx_fleet_models_source"] = "vring-9"
    cluster.declare(declared)
    result, found = cluster.run("models", "sync")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "vring-9" in result.stdout + result.stderr and "mlx_fleet.cluster.model_copy" not in found

    cluster.cluster_vars["mlx_fleet_models_source"] = SOURCE
    cluster.declare(declared)
    result, _ = cluster.run("lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr
    lock = {m["name"]: m for m in json.loads((sim.dir / ".mlx-models.lock.json").read_text())["models"]}

    # --check: vring-2 is where the entry is fetched, from the Hub; nothing is fetched or copied.
    before = logged(sim)
    result, found = cluster.run("models", "sync", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    plan = sync_plan(found)
    assert plan["fetched"] == {"tiny-src": SOURCE}
    assert [r["sender"] for r in plan["macs"][SOURCE]["receive"]] == ["hub"]
    assert all(r["sender"] in macs for mac in macs if mac != SOURCE for r in plan["macs"][mac]["receive"])
    assert hub_requests(sim, before) == [] and not controller_cache.exists()

    before, counted = logged(sim), cluster.management_bytes()
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    crossed = cluster.management_bytes() - counted
    assert hub_bytes <= crossed < 1.5 * hub_bytes, crossed  # one copy over the management network: the Hub's to vring-2
    assert not controller_cache.exists() or list(controller_cache.rglob("*")) == []  # the controller fetched nothing
    address = sim.state()["nodes"][SOURCE]["management_ip"]
    downloads = [words for words in hub_requests(sim, before) if "/resolve/" in words[2] or words[2].startswith("/model")]
    assert downloads and {words[0] for words in hub_requests(sim, before)} == {address}, downloads
    report = sync_report(found)
    assert report["complete"] and report["fetched"] == {"tiny-src": SOURCE}
    senders = {row["mac"]: row["senders"] for row in report["rows"]}
    assert senders[SOURCE] == ["hub"] and all(set(senders[mac]) <= set(macs) for mac in macs if mac != SOURCE)
    assert all(len(received(found)[mac]) == len(lock["tiny-src"]["files"]) for mac in macs)
    for mac in macs:
        blobs = cluster.hub_cache(mac) / "models--acme--tiny-src" / "blobs"
        assert all(blob_digest(blobs / (f.get("sha256") or f["git_sha1"]), f) for f in lock["tiny-src"]["files"])
        assert not (cluster.hub_cache(mac) / "models--acme--tiny-src" / ".mlx-fleet-fetch").exists()
    result, _ = cluster.run("models", "status", "--deep")
    assert result.returncode == 0, result.stdout + result.stderr

    # A second sync copies nothing and asks the Hub nothing.
    before = logged(sim)
    result, found = cluster.run("models", "sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert received(found) == {} and hub_requests(sim, before) == []

    # A gated entry without a token: every file of it fails on vring-2 as the Hub's refusal (exit 1).
    declared.append({"name": "gated-src", "repo": GATED, "revision": "main"})
    cluster.declare(declared)
    result, _ = cluster.run("lock", "--models-only")
    assert result.returncode == 0, result.stdout + result.stderr
    result, found = cluster.run("models", "sync")
    assert result.returncode == 1, result.stdout + result.stderr
    rows = {row["mac"]: row for row in sync_report(found)["rows"]}
    assert {(f["model"], f.get("refusal")) for f in rows[SOURCE]["failed"]} == {("gated-src", "gated")}
    assert all(not (cluster.hub_cache(mac) / "models--acme--gated-src" / "refs").exists() for mac in macs)
    assert not controller_cache.exists() or list(controller_cache.rglob("*")) == []

    # With the user's token on the controller: fetched by vring-2, on every Mac; the token nowhere it should not be.
    token = "hf_" + secrets.token_hex(16)
    with Ps(environment=False) as taken:  # argv only: the controller's own processes hold HF_TOKEN, the user's
        result, found = cluster.run("models", "sync", env=dict(cluster.env, HF_TOKEN=token))
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(received(found)) == macs and sync_report(found)["fetched"] == {"gated-src": SOURCE}
    assert taken.seen and [listing for listing in taken.seen if token in listing] == []
    assert token not in result.stdout + result.stderr
    assert files_holding(sim, token) == []
