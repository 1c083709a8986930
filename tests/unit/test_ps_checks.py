"""The check before a launch (mlx_fleet.run.checks) without Macs: the published hostfile against the last publish,
the cluster model and the inventory; the models a command names; one Mac's reads judged."""

import json

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import MODEL_FILE, ClusterModel, link
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import outputs
from mlx_fleet.run import checks

HOSTS = ["a", "b"]
AB = link(Cable(Port("a", 1), Port("b", 1)), "10.9.0.0/30", devices=("en2", "en3"))
RING = {"backend": "ring", "envs": [], "hosts": [{"ssh": "a", "ips": ["10.9.0.1"], "rdma": []},
                                                  {"ssh": "b", "ips": ["10.9.0.2"], "rdma": []}]}
JACCL = {"backend": "jaccl", "envs": [], "hosts": [{"ssh": "a", "ips": [], "rdma": [None, "rdma_en2"]},
                                                    {"ssh": "b", "ips": [], "rdma": ["rdma_en3", None]}]}


def published(folder, hostfile=RING, backend="ring"):
    """The output folder as a converge leaves it: the hostfile and the cluster model in one generation."""
    with outputs.staged(folder) as stage:
        (stage / "hostfile.json").write_text(json.dumps(hostfile))
        (stage / MODEL_FILE).write_text(json.dumps(ClusterModel(None, [AB], backend=backend).to_dict()))
    return folder


def problems(folder, hosts=HOSTS):
    data, found = checks.published_hostfile(folder, hosts)
    assert all((f.kind, f.hosts) == ("hostfile-stale", ()) for f in found)
    return data, [f.found for f in found]


def test_the_published_hostfile_matching_its_model_passes(tmp_path):
    assert problems(published(tmp_path)) == (RING, [])
    assert problems(published(tmp_path / "j", JACCL, "jaccl")) == (JACCL, [])


def test_a_missing_or_unreadable_hostfile_is_one_finding(tmp_path):
    assert problems(tmp_path) == (None, [f"is missing in {tmp_path}"])
    (tmp_path / "hostfile.json").write_text("{}")
    data, found = problems(tmp_path)
    assert data is None and len(found) == 1


def test_a_hostfile_replaced_by_hand_and_unlike_the_model_and_inventory(tmp_path):
    folder = published(tmp_path)
    edited = json.loads(json.dumps(RING))
    edited["hosts"][1]["ips"] = ["10.99.0.2"]
    (folder / "hostfile.json").unlink()
    (folder / "hostfile.json").write_text(json.dumps(edited))
    data, found = problems(folder, ["a", "b", "c"])
    assert data == edited and len(found) == 3  # replaced, an address no cable has, the inventory's Macs


def test_rdma_devices_and_backend_against_the_model():
    model = ClusterModel(None, [AB], backend="jaccl")
    assert checks.unlike_model(JACCL, model) == []
    wrong = json.loads(json.dumps(JACCL))
    wrong["hosts"][0]["rdma"] = [None, "rdma_en9"]
    assert len(checks.unlike_model(wrong, model)) == 1
    assert len(checks.unlike_model(RING, model)) == 1  # the backend


def test_the_models_a_command_names():
    declared = (ModelDeclaration("tiny", path="/m/tiny"), ModelDeclaration("big", repo="org/Big-4bit"),
                ModelDeclaration("other", path="/m/other"))
    named = checks.named_models(declared, ["python", "-m", "mlx_lm.generate", "--model=org/Big-4bit", "tiny"])
    assert [m.name for m in named] == ["tiny", "big"]
    assert checks.named_models(declared, ["python", "x.py", "--tinyish"]) == []
    assert checks.model_folder(declared[1], "/hf", "/models") == "/hf/models--org--Big-4bit/blobs"
    assert checks.model_folder(declared[0], "/hf", "/models") == "/models/tiny"


def test_one_macs_reads_against_a_launch():
    ps = "  PID  PPID     ELAPSED    RSS COMMAND\n    9     1       00:05   1000 /env/bin/python x.py\n"
    reads = {checks.HELD_READ: (0, "held: os-update in progress\n"), checks.HOSTFILE_READ: (0, json.dumps(JACCL)),
             "ps": (0, ps), "model-tiny": (1, ""), "model-big": (0, "123\t/hf/models--org--Big/blobs\n")}
    found = checks.on_mac("a", reads, {"rdma_enabled": False}, RING, "jaccl", "/env", {"tiny": None, "big": None})
    assert [(f.kind, f.hosts) for f in found] == [("update-held", ("a",)), ("hostfile-stale", ("a",)),
                                                  ("rdma-off", ("a",)), ("job-running", ("a",)),
                                                  ("model-missing", ("a",))]
    assert found[0].found == "os-update in progress" and (found[4].found, found[4].fact) == ("missing", "model tiny")
    clean = {checks.HOSTFILE_READ: (0, json.dumps(RING)), "ps": (0, ps.split("\n")[0] + "\n")}
    assert checks.on_mac("a", clean, {"rdma_enabled": False}, RING, "ring", "/env", {}) == []
    # by size: smaller than its pin is incomplete (du -sk counts KiB), at least its pin is there
    sized = {"model-big": (0, "123\t/hf/models--org--Big/blobs\n")}
    [short] = checks.on_mac("a", sized, {}, None, "ring", "/env", {"big": 123 * 1024 + 1})
    assert (short.kind, short.fact, short.found.split()[0]) == ("model-missing", "model big", "incomplete")
    assert checks.on_mac("a", sized, {}, None, "ring", "/env", {"big": 123 * 1024}) == []
