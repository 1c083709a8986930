"""`verify --script --model NAME` (issue 28): the model is read on every Mac as models status --deep reads it, a
Mac without it verified is refused in one line naming that Mac and the sync's command before anything starts, and
the task gets the model's path on the Macs in MLX_FLEET_MODEL_PATH."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from mlx_fleet.verify import models, nodes, run
from mlx_fleet.verify.plan import Settings, VerifyError


@pytest.fixture
def cluster(tmp_path):
    """A path entry `tiny` on the controller and its copy on three 'Macs' (folders here)."""
    source = tmp_path / "src" / "tiny"
    source.mkdir(parents=True)
    (source / "config.json").write_text("{}")
    (source / "model.safetensors").write_bytes(bytes(range(256)) * 40)
    macs = {}
    for mac in ("mini-1", "mini-2", "mini-3"):
        held = tmp_path / mac / "models" / "tiny"
        held.mkdir(parents=True)
        for path in source.iterdir():
            (held / path.name).write_bytes(path.read_bytes())
        macs[mac] = tmp_path / mac / "models"
    settings = Settings(tmp_path / "out", sys.executable, "disabled", [{"name": "tiny", "path": str(source)}],
                        str(tmp_path / ".mlx-env.lock.json"))
    return settings, macs


def local_ssh(macs, monkeypatch):
    """verify's ssh, run here: each 'Mac' is its own models folder (the command's models_dir is swapped)."""
    def ssh(target, command, stdin=b"", timeout=60, **kwargs):
        asked = stdin.replace(b'"models_dir": "/opt/mlx-fleet/models"', f'"models_dir": "{macs[target.name]}"'.encode())
        return subprocess.run(["sh", "-c", command], input=asked, capture_output=True, timeout=timeout)
    monkeypatch.setattr(nodes, "ssh", ssh)


def test_a_mac_with_a_flipped_byte_is_refused_naming_it_and_the_sync(cluster, monkeypatch):
    settings, macs = cluster
    local_ssh(macs, monkeypatch)
    manifest = models.pinned(settings, "tiny", "inv")
    assert [f["sha256"] for f in manifest["files"]] == [
        hashlib.sha256(b"{}").hexdigest(), hashlib.sha256(bytes(range(256)) * 40).hexdigest()]
    hf_cache, models_dir = models.where(settings)
    held = models.read(list(macs), manifest, sys.executable, hf_cache, models_dir)
    assert all(held[mac]["deep"] and held[mac]["models"][0]["present"] for mac in macs)
    assert models.refusal("tiny", manifest, held, "inv") is None

    weights = macs["mini-2"] / "tiny" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 1
    weights.write_bytes(bytes(data))
    (macs["mini-3"] / "tiny" / "config.json").unlink()
    held = models.read(list(macs), manifest, sys.executable, hf_cache, models_dir)
    line = models.refusal("tiny", manifest, held, "inv")
    assert line is not None and "\n" not in line
    assert "mini-2 (model tiny: model.safetensors: other bytes)" in line and "mini-3" in line and "mini-1" not in line
    assert line.endswith("mlx-fleet models sync -i inv")


def test_a_mac_that_cannot_be_read_is_refused_too(cluster):
    settings, macs = cluster
    manifest = models.pinned(settings, "tiny", "inv")
    line = models.refusal("tiny", manifest, {"mini-1": "not read (Connection refused)"}, "inv")
    assert line.startswith("--model tiny is not present and verified on mini-1 (not read (Connection refused))")


def test_a_model_not_declared_or_not_pinned_is_bad_input(cluster):
    settings, macs = cluster
    with pytest.raises(VerifyError, match="other: not a model of mlx_fleet_models"):
        models.pinned(settings, "other", "inv")
    hub = Settings(settings.output_dir, settings.python, "disabled", [{"name": "qwen", "repo": "org/qwen"}],
                   settings.lock_file)
    with pytest.raises(VerifyError, match="qwen: not pinned: run mlx-fleet lock -i inv"):
        models.pinned(hub, "qwen", "inv")


def test_the_task_gets_the_models_path_on_every_mac():
    hub = {"name": "qwen", "source": "hub", "repo": "org/qwen", "repo_type": "model", "commit": "c" * 40,
           "files": []}
    assert models.path_on_macs(hub, "/hf", "/m") == f"/hf/models--org--qwen/snapshots/{'c' * 40}"
    assert models.path_on_macs({"name": "tiny", "source": "path", "files": []}, "/hf", "/m") == "/m/tiny"
    hostfile = {"backend": "ring", "envs": ["HF_HUB_OFFLINE=1"], "hosts": []}
    assert run.with_model(hostfile, ("tiny", "/m/tiny"))["envs"] == ["HF_HUB_OFFLINE=1", "MLX_FLEET_MODEL_PATH=/m/tiny"]
    assert run.with_model(hostfile, None) is hostfile
    assert hostfile["envs"] == ["HF_HUB_OFFLINE=1"]
