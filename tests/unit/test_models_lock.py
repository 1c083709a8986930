"""`mlx-fleet lock` for the models (plugin_utils.models.hub_pin): each Hub entry of mlx_fleet_models pinned to a
commit with every file's size and hash as the Hub gives them, against macsim's Hub stand-in through the real
huggingface_hub client; a pinned model stays pinned when its branch moves, until asked; every refusal is one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelManifest
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import hub_pin
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    MODELS_LOCK_NAME, ModelsLockError, load_models_lock, models_lock_problem)
from test_sim_hub import git_blob_id, make_repo, running_hub

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TINY = [{"name": "tiny", "repo": "acme/tiny"}]


@pytest.fixture
def hub(tmp_path):
    from huggingface_hub import HfApi

    with running_hub(tmp_path) as running:
        running["api"] = HfApi(endpoint=running["endpoint"], token=False)
        running["env_lock"] = str(tmp_path / "inv" / ".mlx-env.lock.json")
        yield running


def lock(hub, declared=TINY, update=(), write=True) -> dict:
    return hub_pin.update_models_lock(declared, hub["env_lock"], update, write=write, hub=hub["api"])


def pinned(hub) -> dict[str, ModelManifest]:
    return load_models_lock(Path(hub["env_lock"]).with_name(MODELS_LOCK_NAME))


def test_a_hub_model_is_pinned_to_its_commit_with_each_files_size_and_hash(hub):
    found = lock(hub)
    assert (found["changed"], found["pinned"], found["kept"], found["files"]) == (True, ["tiny"], [], 3)
    model = pinned(hub)["tiny"]
    commit = hub["api"].model_info("acme/tiny").sha
    assert (model.repo, model.revision, model.commit, model.source) == ("acme/tiny", "main", commit, "hub")
    assert [f.to_json() for f in model.files] == [
        {"path": "config.json", "size": 24, "git_sha1": git_blob_id(b'{"model_type": "llama"}\n')},
        {"path": "model.safetensors", "size": 4096, "sha256": hashlib.sha256(b"\1" * 4096).hexdigest()},
        {"path": "tok/vocab.txt", "size": 4, "git_sha1": git_blob_id(b"a\nb\n")},
    ]
    assert not Path(hub["env_lock"]).exists()  # the environment's lock is not touched
    assert lock(hub)["changed"] is False


def test_a_moved_branch_stays_pinned_until_asked_to_pin_again(hub):
    lock(hub)
    first = pinned(hub)["tiny"].commit
    make_repo(hub["root"] / "acme" / "tiny@v1")  # the old commit stays on the Hub
    (hub["root"] / "acme" / "tiny" / "config.json").write_text("{}\n")
    kept = lock(hub)
    assert (kept["changed"], kept["pinned"], kept["kept"]) == (False, [], ["tiny"])
    assert pinned(hub)["tiny"].commit == first
    again = lock(hub, update=["tiny"])
    assert (again["changed"], again["pinned"]) == (True, ["tiny"])
    assert pinned(hub)["tiny"].commit not in (first, None)
    assert pinned(hub)["tiny"].files[0].size == 3


def test_a_changed_declaration_is_pinned_again_and_an_undeclared_model_dropped(hub):
    make_repo(hub["root"] / "acme" / "tiny@v1", weights=b"\2" * 10)
    lock(hub, TINY + [{"name": "other", "repo": "acme/tiny", "revision": "v1"}])
    found = lock(hub, [{"name": "tiny", "repo": "acme/tiny", "revision": "v1"}])
    assert (found["pinned"], found["kept"], found["changed"]) == (["tiny"], [], True)
    assert list(pinned(hub)) == ["tiny"] and pinned(hub)["tiny"].files[1].size == 10


def test_a_pinned_commit_gone_from_the_hub_is_one_line_naming_the_fix(hub):
    lock(hub)
    (hub["root"] / "acme" / "tiny" / "config.json").write_text("{}\n")  # main moved, its old commit gone
    with pytest.raises(ModelsLockError) as caught:
        lock(hub)
    assert caught.value.repin == "tiny"
    assert models_lock_problem(caught.value, "inv/hosts.yml", cli=True).endswith(
        ": mlx-fleet lock -i inv/hosts.yml --update-models tiny")
    assert models_lock_problem(caught.value, "inv/hosts.yml").endswith(
        ": ansible-playbook -i inv/hosts.yml mlx_fleet.cluster.lock -e mlx_fleet_lock_update_models=tiny")


@pytest.mark.parametrize("declared, names", [
    ([{"name": "tiny", "repo": "acme/tiny", "revision": "v9"}], ("acme/tiny", "'v9'")),
    ([{"name": "tiny", "repo": "acme/none"}], ("acme/none",)),
])
def test_an_unknown_repo_or_revision_is_one_line_and_writes_nothing(hub, declared, names):
    with pytest.raises(ModelsLockError) as caught:
        lock(hub, declared)
    message = str(caught.value)
    assert "\n" not in message and caught.value.repin is None
    assert all(name in message for name in ("tiny", *names))
    assert hub["endpoint"] in message
    assert pinned(hub) == {}


def test_a_re_pin_of_an_undeclared_name_is_refused(hub):
    with pytest.raises(ModelsLockError):
        lock(hub, update=["nope"])


def test_without_hub_models_there_is_no_models_lock_and_no_huggingface_hub(hub, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub raises ImportError
    found = hub_pin.update_models_lock([{"name": "local", "path": "/srv/models/local"}], hub["env_lock"], ())
    assert (found["changed"], found["pinned"]) == (False, [])
    assert not Path(hub["env_lock"]).with_name(MODELS_LOCK_NAME).exists()
    with pytest.raises(ModelsLockError) as caught:
        hub_pin.update_models_lock(TINY, hub["env_lock"], ())
    assert "huggingface_hub" in str(caught.value) and "\n" not in str(caught.value)


def write_inventory(tmp_path: Path, models: list[dict]) -> Path:
    inventory = tmp_path / "inv" / "hosts.yml"
    inventory.parent.mkdir(exist_ok=True)
    inventory.write_text(yaml.safe_dump({"all": {"children": {"mlx_cluster": {
        "hosts": {"mini-1": {"ansible_host": "192.0.2.1"}, "mini-2": {"ansible_host": "192.0.2.2"}},
        "vars": {"mlx_fleet_models": models}}}}}))
    return inventory


def hub_env(hub, tmp_path: Path) -> dict:
    token = "hf_" + "s3cret" * 6  # the user's token: read by huggingface_hub, never written by mlx-fleet
    return {**os.environ, "HF_ENDPOINT": hub["endpoint"], "HF_TOKEN": token, "HF_HOME": str(tmp_path / "hf"),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def test_the_cli_pins_the_models_only_and_leaves_the_environments_lock(hub, tmp_path):
    inventory = write_inventory(tmp_path, TINY)
    env_lock = inventory.parent / ".mlx-env.lock.json"
    env_lock.write_text('{"format": 1}\n')
    env = hub_env(hub, tmp_path)
    done = subprocess.run([str(BIN / "mlx-fleet"), "lock", "-i", str(inventory), "--models-only"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert env_lock.read_text() == '{"format": 1}\n'
    models_lock = inventory.parent / MODELS_LOCK_NAME
    assert [m["name"] for m in json.loads(models_lock.read_text())["models"]] == ["tiny"]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".safetensors"]
    assert not [p for p in written if env["HF_TOKEN"] in p.read_text(errors="replace")]
    assert env["HF_TOKEN"] not in done.stdout + done.stderr

    bad = write_inventory(tmp_path, [{"name": "tiny", "repo": "acme/tiny", "revision": "v9"}])
    refused = subprocess.run([str(BIN / "mlx-fleet"), "lock", "-i", str(bad), "--models-only"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_lock_playbook_pins_the_models(hub, tmp_path):
    from simlib import run_recorded  # the test-only JSON record of a playbook run (no simulated Mac is made)

    inventory = write_inventory(tmp_path, TINY)
    done = run_recorded([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "lock.yml"),
                         "-e", "mlx_fleet_lock_models_only=true"], hub_env(hub, tmp_path), timeout=120, cwd=tmp_path,
                        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    result = done.recorded["plays"][0]["tasks"][-1]["hosts"]["mini-1"]
    assert (result["changed"], result["models"]["pinned"], result["models"]["files"]) == (True, ["tiny"], 3)
    assert pinned(hub)["tiny"].commit == hub["api"].model_info("acme/tiny").sha


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"format": 2, "models": []}', '{"format": 1}', "[" * 100_000,
    '{"format": 1, "models": [{"name": "m", "source": "hub", "repo": "a/b", "commit": "0", "files": []}]}',
    '{"format": 1, "models": [{"name": "m", "source": "path", "files": [{"path": "../x", "size": 1, "sha256": "'
    + "0" * 64 + '"}]}]}',
])
def test_a_models_lock_mlx_fleet_did_not_write_is_one_error(tmp_path, text):
    path = tmp_path / MODELS_LOCK_NAME
    path.write_text(text)
    with pytest.raises(ModelsLockError) as caught:
        load_models_lock(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_hub_answer_naming_a_file_outside_the_model_is_refused(tmp_path):
    from types import SimpleNamespace

    sibling = SimpleNamespace(rfilename="../../.ssh/authorized_keys", size=3, blob_id="1" * 40, lfs=None)
    hub = SimpleNamespace(endpoint="http://hub.test",
                          repo_info=lambda *a, **k: SimpleNamespace(sha="2" * 40, siblings=[sibling]))
    with pytest.raises(ModelsLockError) as caught:
        hub_pin.update_models_lock(TINY, str(tmp_path / ".mlx-env.lock.json"), (), hub=hub)
    assert "'../../.ssh/authorized_keys'" in str(caught.value) and "model tiny" in str(caught.value)
    assert not (tmp_path / MODELS_LOCK_NAME).exists()
