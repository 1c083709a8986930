"""The models sync's pieces without Ansible (issue 28): the verified raw stream over loopback (a file appears under
its final name only when it hashes to its pin, an interrupted copy resumes from the bytes that arrived, a receiver
without the run's token is served nothing, a Hub entry's ref comes last), and the plan (one copy from the
controller, the others along the cables from the nearest Mac holding the file, refused for space)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import threading
import time

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files, model_stream
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import End, Link, Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import sync_plan

TOKEN = "0123456789abcdef"


def pinned_file(path: str, data: bytes) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def serving(tmp_path, files: dict[str, bytes], clients: int = 1):
    """A Sender on loopback holding FILES of model `m` (written under tmp_path/src)."""
    holdings = model_stream.Holdings()
    for name, data in files.items():
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
        holdings.ready(("m", name), str(tmp_path / "src" / name))
    return model_stream.Sender(["127.0.0.1"], 0, TOKEN, holdings, clients, time.monotonic() + 30)


@pytest.mark.parametrize("error, fails_after, says", [
    (errno.EHOSTUNREACH, "idle", "no route to 10.0.0.2:9 for"),  # its cable pulled: given up after IDLE_SECONDS
    (errno.ECONNREFUSED, "startup", "no listener at 10.0.0.2:9"),  # up, its listener not yet: the startup wait
    (None, "idle", "no route to 10.0.0.2:9 for"),  # silent: the first attempt's own wait counts
])
def test_a_receiver_gives_up_on_a_sender_it_has_no_route_to_sooner_than_on_one_still_starting(
        monkeypatch, error, fails_after, says):
    monkeypatch.setattr(model_stream, "IDLE_SECONDS", 0.6)
    monkeypatch.setattr(model_stream, "STARTUP_SECONDS", 3.0)
    tries = []

    def connect(address, timeout):
        tries.append(time.monotonic())
        if error is None:  # connect() waited out its timeout
            time.sleep(timeout)
            raise socket.timeout("timed out")
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(model_stream.socket, "create_connection", connect)
    with pytest.raises(model_stream.CopyFailed) as failed:
        model_stream.Receiver("10.0.0.2", 9, TOKEN, time.monotonic() + 60)
    assert str(failed.value).startswith(says)
    took = time.monotonic() - tries[0]
    assert took < 1.2 if fails_after == "idle" else took >= 1.2, tries


def test_a_file_is_renamed_into_place_only_when_its_bytes_hash_to_the_pin(tmp_path):
    data = os.urandom(300_000)
    sender = serving(tmp_path, {"w.safetensors": data, "other.bin": data[:-1] + b"x"})
    manifest = {"name": "m", "source": "path"}
    receiver = model_stream.Receiver("127.0.0.1", sender.port, TOKEN, time.monotonic() + 10)
    final = str(tmp_path / "dst" / "w.safetensors")
    assert receiver.fetch(manifest, pinned_file("w.safetensors", data), final) == len(data)
    with pytest.raises(model_stream.CopyFailed):  # the sender's bytes are not the pinned ones
        receiver.fetch(manifest, dict(pinned_file("other.bin", data), path="other.bin"), str(tmp_path / "dst" / "o"))
    receiver.close()
    assert sender.wait() == 2 * len(data)
    assert sorted(os.listdir(tmp_path / "dst")) == ["w.safetensors"]  # nothing else, no temporary file left
    assert (tmp_path / "dst" / "w.safetensors").read_bytes() == data


def test_an_interrupted_copy_resumes_from_the_bytes_that_arrived(tmp_path):
    data = os.urandom(500_000)
    manifest = {"name": "m", "source": "path"}
    final = str(tmp_path / "dst" / "w.safetensors")
    os.makedirs(os.path.dirname(final))
    with open(model_stream.part_path(manifest, final), "wb") as part:
        part.write(data[:123_456])  # what a cut copy left under the temporary name
    sender = serving(tmp_path, {"w.safetensors": data})
    receiver = model_stream.Receiver("127.0.0.1", sender.port, TOKEN, time.monotonic() + 10)
    moved = receiver.fetch(manifest, pinned_file("w.safetensors", data), final)
    receiver.close()
    assert (moved, sender.wait()) == (len(data) - 123_456, len(data) - 123_456)
    assert open(final, "rb").read() == data


def test_a_receiver_without_the_token_is_served_nothing(tmp_path):
    data = os.urandom(1000)
    sender = serving(tmp_path, {"w.bin": data})
    stranger = model_stream.Receiver("127.0.0.1", sender.port, "not-the-token", time.monotonic() + 10)
    with pytest.raises(model_stream.CopyFailed):
        stranger.fetch({"name": "m", "source": "path"}, pinned_file("w.bin", data), str(tmp_path / "dst" / "w.bin"))
    assert not (tmp_path / "dst" / "w.bin").exists()
    sender.deadline = time.monotonic()
    assert sender.wait() == 0


def test_a_file_still_arriving_is_served_once_verified_and_a_failed_one_never(tmp_path):
    holdings = model_stream.Holdings()
    holdings.arriving(("m", "a"))
    holdings.arriving(("m", "b"))
    threading.Timer(0.2, holdings.ready, (("m", "a"), "/x/a")).start()
    threading.Timer(0.2, holdings.failed, (("m", "b"),)).start()
    assert holdings.wait(("m", "a"), time.monotonic() + 5) == "/x/a"
    assert holdings.wait(("m", "b"), time.monotonic() + 5) is None
    assert holdings.wait(("m", "unknown"), time.monotonic() + 5) is None


def test_a_hub_entry_is_linked_from_its_snapshot_and_its_ref_written_last(tmp_path):
    data = b"weights" * 1000
    commit = "c" * 40
    manifest = {"name": "m", "source": "hub", "repo": "acme/tiny", "repo_type": "model", "revision": "main",
                "commit": commit, "files": [pinned_file("sub/w.safetensors", data)]}
    root = model_files.model_root(manifest, str(tmp_path), "/unused")
    pinned = manifest["files"][0]
    os.makedirs(os.path.dirname(model_files.blob_path(root, pinned)))
    with open(model_files.blob_path(root, pinned), "wb") as blob:
        blob.write(data)
    assert model_files.read_model(manifest, str(tmp_path), "/unused", True)["present"] is False
    assert model_stream.link_snapshot(manifest, root, pinned) is True
    assert model_files.read_model(manifest, str(tmp_path), "/unused", True)["present"] is False  # no ref yet
    assert model_stream.write_ref(root, "main", commit) is True
    assert model_files.read_model(manifest, str(tmp_path), "/unused", True)["present"] is True
    assert (model_stream.link_snapshot(manifest, root, pinned), model_stream.write_ref(root, "main", commit)) == (
        False, False)


def ring(*macs: str) -> list[Link]:
    """Cables M0-M1, M1-M2, ..., the last back to M0, each with its /30."""
    links = []
    for index, mac in enumerate(macs):
        other = macs[(index + 1) % len(macs)]
        links.append(Link(End(Port(mac, 1), None, f"192.168.{index}.1"), End(Port(other, 2), None, f"192.168.{index}.2"),
                          None, f"192.168.{index}.0/30"))
    return links


MANIFEST = {"name": "m", "source": "path", "files": [{"path": "a", "size": 10, "sha256": "0" * 64},
                                                      {"path": "b", "size": 5, "sha256": "1" * 64}]}


def facts(states: dict[str, str], free: int = 10**9) -> dict:
    return {"deep": True, "models": [{"name": "m", "present": False, "free_bytes": free,
                                      "files": [{"path": p, "state": s, "size": None} for p, s in states.items()]}]}


def test_a_file_no_mac_holds_crosses_from_the_controller_once_then_along_the_cables():
    macs = ["m1", "m2", "m3", "m4"]
    plan = sync_plan.plan([MANIFEST], {mac: facts({"a": "missing", "b": "missing"}) for mac in macs}, macs,
                          ring(*macs), 47181)
    assert {mac: sorted(senders) for mac, senders in plan.pulls.items()} == {
        "m1": ["controller"], "m2": ["m1"], "m4": ["m1"], "m3": ["m2"]}
    assert [f["path"] for f in plan.from_controller()] == ["a", "b"]
    found = plan.to_json(sync_plan.cable_addresses(ring(*macs)))
    assert found["macs"]["m2"]["receive"] == [{"sender": "m1", "address": "192.168.0.1", "port": 47181,
                                                "files": [{"model": "m", "path": "a"}, {"model": "m", "path": "b"}]}]
    assert found["macs"]["m1"]["serve"] == {"addresses": ["192.168.0.1", "192.168.3.2"], "port": 47181, "clients": 2}
    assert (found["macs"]["m3"]["files"], found["macs"]["m3"]["bytes"]) == (2, 15)


def test_a_file_one_mac_lacks_comes_from_a_neighbour_that_holds_it_and_nothing_else_moves():
    macs = ["m1", "m2", "m3", "m4"]
    held = {mac: facts({"a": "ok", "b": "ok"}) for mac in macs}
    held["m3"] = facts({"a": "hash_differs", "b": "ok"})
    plan = sync_plan.plan([MANIFEST], held, macs, ring(*macs), 47181)
    assert plan.pulls == {"m3": {"m2": [{"model": "m", "path": "a"}]}} and plan.from_controller() == []
    assert sync_plan.plan([MANIFEST], {mac: facts({"a": "ok", "b": "ok"}) for mac in macs}, macs, ring(*macs),
                          1).pulls == {}


def test_a_mac_short_of_space_refuses_the_plan_before_anything_is_routed():
    macs = ["m1", "m2"]
    held = {"m1": facts({"a": "missing", "b": "ok"}), "m2": facts({"a": "missing", "b": "missing"}, free=14)}
    plan = sync_plan.plan([MANIFEST], held, macs, ring(*macs), 1)
    assert plan.short_of_space == [{"mac": "m2", "needed": 15, "free": 14}] and plan.pulls == {}


def test_a_mac_pulls_a_hub_entry_into_huggingface_hubs_layout_and_a_lost_ref_is_written_again(tmp_path, run_module):
    from ansible_collections.mlx_fleet.cluster.plugins.modules import model_copy

    data = {"model.safetensors": os.urandom(200_000), "config.json": b"{}"}
    commit = "a" * 40
    manifest = {"name": "m", "source": "hub", "repo": "acme/tiny", "repo_type": "model", "revision": "main",
                "commit": commit, "files": [pinned_file(name, blob) for name, blob in data.items()]}
    sender = serving(tmp_path, data)
    cache = str(tmp_path / "hub")
    params = {"models": [manifest], "hf_cache": cache, "models_dir": str(tmp_path / "models"), "token": TOKEN,
              "timeout": 30, "serve": None,
              "receive": [{"sender": "controller", "address": "127.0.0.1", "port": sender.port,
                           "files": [{"model": "m", "path": name} for name in data]}]}
    checked = run_module(model_copy.main, dict(params, _ansible_check_mode=True))
    assert checked["changed"] is True and not os.path.exists(cache)  # check mode: said, not done
    progress = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    progress.bind(("127.0.0.1", 0))
    found = model_copy.copy(dict(params, progress={"address": "127.0.0.1", "port": progress.getsockname()[1],
                                                   "name": "mac1"}))
    progress.setblocking(False)
    heard = []
    while True:
        try:
            heard.append(json.loads(progress.recv(512)))
        except BlockingIOError:
            break
    total = sum(len(blob) for blob in data.values())
    assert heard[-1] == ["mac1", total, total]  # the controller's live line: bytes held of those to receive
    assert ([f["path"] for f in found["received"]], found["failed"], found["refs"]) == (list(data), [], ["m"])
    assert found["bytes"] == sum(len(blob) for blob in data.values()) and sender.wait() == found["bytes"]
    assert model_files.read_model(manifest, cache, "/unused", True)["present"] is True

    root = model_files.model_root(manifest, cache, "/unused")
    os.remove(model_files.ref_path(root, "main"))
    again = model_copy.copy(dict(params, receive=[]))
    assert (again["received"], again["refs"]) == ([], ["m"])
    assert model_files.read_model(manifest, cache, "/unused", True)["present"] is True
    assert model_copy.copy(dict(params, receive=[]))["refs"] == []


def test_a_hub_entry_holding_every_file_without_its_ref_is_finished_and_a_mac_with_nothing_to_do_runs_nothing():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step

    hub = dict(MANIFEST, name="h", source="hub", repo="acme/h", revision="main", commit="c" * 40)
    macs = ["m1", "m2"]
    held = {mac: {"deep": True, "models": [dict(facts({"a": "ok", "b": "ok"})["models"][0], name="h", ref="ok")]}
            for mac in macs}
    held["m1"]["models"][0]["present"] = True
    held["m2"]["models"][0]["ref"] = "missing"
    found = sync_plan.plan([hub], held, macs, ring(*macs), 1).to_json({})
    assert found["macs"] == {"m2": {"receive": [], "finish": ["h"], "serve": None, "files": 0, "bytes": 0}}
    plan = dict(found, manifests=[hub])
    assert [models_step.nothing_to_do(plan, mac) for mac in macs] == [True, False]


def test_without_cables_every_mac_is_fed_by_the_controller_and_the_step_warns(tmp_path):
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run

    macs = ["m1", "m2"]
    plan = sync_plan.plan([MANIFEST], {mac: facts({"a": "missing", "b": "ok"}) for mac in macs}, macs, [], 1)
    assert {mac: list(senders) for mac, senders in plan.pulls.items()} == {"m1": ["controller"], "m2": ["controller"]}

    class View:
        names = macs

        def setting(self, key):
            return {"mlx_fleet_models_port": 1, "mlx_fleet_models": [{"name": "m", "path": str(tmp_path)}]}[key]

        def having(self, wanted):
            return self

        def facts(self, fact):
            return {mac: facts({"a": "missing", "b": "ok"}) for mac in macs}

    run = Run(tmp_path, write=False, holder="test")
    found = models_step.sync_plan(View(), run, {"manifests": [MANIFEST], "not_pinned": []}, [])
    assert len(run.shown) == 1 and found["plan"]["folders"] == {}  # check mode: nothing fetched
    assert [r["sender"] for r in found["plan"]["macs"]["m2"]["receive"]] == ["controller"]


def test_a_sender_gone_silent_mid_file_fails_that_file_and_the_rest_without_asking_again(tmp_path, monkeypatch):
    from ansible_collections.mlx_fleet.cluster.plugins.modules import model_copy

    monkeypatch.setattr(model_stream, "IDLE_SECONDS", 1)
    data = {name: os.urandom(100_000) for name in ("a.safetensors", "b.safetensors", "c.safetensors")}
    listener = socket.create_server(("127.0.0.1", 0))
    asked = []

    def stalled_sender():  # a pulled cable: half a file, then silence
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as reader:
            reader.readline()
            for line in reader:
                asked.append(line)
                if len(asked) == 1:
                    conn.sendall(b"OK 100000\n" + data["a.safetensors"][:50_000])

    thread = threading.Thread(target=stalled_sender, daemon=True)
    thread.start()
    manifest = {"name": "m", "source": "path", "files": [pinned_file(name, blob) for name, blob in data.items()]}
    found = model_copy.copy({"models": [manifest], "hf_cache": str(tmp_path / "hub"),
                             "models_dir": str(tmp_path / "models"), "token": TOKEN, "timeout": 30, "serve": None,
                             "receive": [{"sender": "mac1", "address": "127.0.0.1",
                                          "port": listener.getsockname()[1],
                                          "files": [{"model": "m", "path": name} for name in data]}]})
    thread.join(10)
    assert found["received"] == [] and [f["path"] for f in found["failed"]] == list(data)
    assert len({f["why"] for f in found["failed"]}) == 1 and asked[1:] == [b'["BYE"]\n']  # no second GET
    assert os.path.getsize(tmp_path / "models" / "m" / ".a.safetensors.mlx-fleet-part") == 50_000  # to resume


def test_the_report_names_each_file_not_copied_with_the_mac_it_was_to_come_from():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_sync

    report = {"complete": False, "bytes": 10, "rows": [
        {"mac": "mini-2", "planned": 2, "received": 1, "bytes": 10, "seconds": 2.0, "senders": ["mini-1"],
         "done": False, "failed": [{"model": "m", "path": "b.safetensors", "from": "mini-1",
                                    "why": "nothing arrived for 30 s"}]},
        {"mac": "mini-3", "planned": 2, "received": 0, "bytes": 0, "seconds": 0, "senders": [], "done": False,
         "failed": []}]}
    assert models_sync.report_lines(report, "inv.yml", cli=True) == [
        "mini-2: received 1 files, 10 B in 2.0 s (5 B/s) from mini-1",
        "mini-2: m/b.safetensors not copied from mini-1: nothing arrived for 30 s",
        "mini-3: 2 files not copied (the Mac did not answer)",
        "not complete on mini-2, mini-3: run mlx-fleet models sync -i inv.yml again to resume"]
