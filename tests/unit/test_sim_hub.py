"""macsim's Hub stand-in (mlx_fleet.sim.hub) answered by the real huggingface_hub client: a snapshot downloads into a
fresh cache and is found there offline, the files' metadata are the stand-in's files' own sizes and hashes, each
fault raises the client's own error, and a cut download resumes with a Range. No root, no cluster: the stand-in
listens on 127.0.0.1 in this process."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from mlx_fleet.sim.hub import Faults, endpoint, serve

CHUNK = 10 * 1024 * 1024  # huggingface_hub writes a download in chunks of this size (constants.DOWNLOAD_CHUNK_SIZE)


def make_repo(folder: Path, weights: bytes = b"\1" * 4096) -> dict[str, bytes]:
    files = {"config.json": b'{"model_type": "llama"}\n', "model.safetensors": weights, "tok/vocab.txt": b"a\nb\n"}
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return files


@contextmanager
def running_hub(tmp_path: Path):
    """The stand-in over tmp_path/repos (acme/tiny in it), its faults changeable by the test, its request log."""
    root = tmp_path / "repos"
    make_repo(root / "acme" / "tiny")
    faults = Faults()
    log = tmp_path / "hub.log"
    api, cdn = serve(str(root), "127.0.0.1", 0, faults, log)
    try:
        yield {"root": root, "faults": faults, "endpoint": endpoint(api), "log": log, "cache": tmp_path / "cache"}
    finally:
        for server in (api, cdn):
            server.shutdown()
            server.server_close()


@pytest.fixture
def hub(tmp_path):
    with running_hub(tmp_path) as running:
        yield running


def client(hub: dict, code: str, offline: bool = False, token: str | None = None) -> subprocess.CompletedProcess:
    """huggingface_hub in a process of its own (it reads HF_ENDPOINT and HF_HUB_OFFLINE when imported)."""
    env = {"HF_ENDPOINT": hub["endpoint"], "HF_HUB_CACHE": str(hub["cache"]), "HF_HOME": str(hub["cache"].parent / "hf"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "PATH": "/usr/bin:/bin",
           **({"HF_HUB_OFFLINE": "1"} if offline else {}), **({"HF_TOKEN": token} if token else {})}
    return subprocess.run([sys.executable, "-c", "import huggingface_hub as hh, json\n" + code], env=env,
                          capture_output=True, text=True, timeout=120)


def error_of(hub: dict, call: str, token: str | None = None) -> str:
    """The class name of the exception CALL raised in the client, or "" when it raised none."""
    done = client(hub, f"try:\n    {call}\nexcept Exception as exc:\n    print(type(exc).__name__)", token=token)
    assert done.returncode == 0, done.stderr[-600:]
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def requests(hub: dict) -> list[str]:
    """The stand-in's log lines, each without the client's address it begins with (here always this machine's)."""
    lines = hub["log"].read_text().splitlines() if hub["log"].exists() else []
    assert all(line.startswith("127.0.0.1 ") for line in lines), lines
    return [line.split(" ", 1)[1] for line in lines]


def test_a_snapshot_downloads_and_is_found_offline_in_the_cache(hub):
    done = client(hub, "print(hh.snapshot_download('acme/tiny'))")
    assert done.returncode == 0, done.stderr
    snapshot = Path(done.stdout.strip())
    assert {p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()} == {
        "config.json", "model.safetensors", "tok/vocab.txt"}
    assert (snapshot / "model.safetensors").read_bytes() == b"\1" * 4096
    assert (snapshot.parents[1] / "refs" / "main").read_text() == snapshot.name
    offline = client(hub, "print(hh.snapshot_download('acme/tiny', local_files_only=True))", offline=True)
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip() == str(snapshot)


def test_model_info_gives_each_files_size_and_hash_as_the_hub_does(hub):
    done = client(hub, "info = hh.HfApi().model_info('acme/tiny', files_metadata=True)\n"
                       "print(json.dumps([info.sha, [[s.rfilename, s.size, s.blob_id, s.lfs and dict(s.lfs)] "
                       "for s in info.siblings]]))")
    assert done.returncode == 0, done.stderr
    commit, siblings = json.loads(done.stdout)
    weights = b"\1" * 4096
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(weights).hexdigest()}\nsize 4096\n"
    assert siblings == [
        ["config.json", 24, git_blob_id(b'{"model_type": "llama"}\n'), None],
        ["model.safetensors", 4096, git_blob_id(pointer.encode()),
         {"size": 4096, "sha256": hashlib.sha256(weights).hexdigest(), "pointer_size": len(pointer)}],
        ["tok/vocab.txt", 4, git_blob_id(b"a\nb\n"), None],
    ]
    assert len(commit) == 40


def test_the_same_content_is_the_same_commit_and_a_change_moves_the_branch(hub):
    show = "print(hh.HfApi().model_info('acme/tiny', revision=REV).sha)"
    first = client(hub, show.replace("REV", "'main'")).stdout.strip()
    make_repo(hub["root"] / "acme" / "tiny@v1")
    assert client(hub, show.replace("REV", "'v1'")).stdout.strip() == first
    (hub["root"] / "acme" / "tiny" / "config.json").write_text("{}\n")
    moved = client(hub, show.replace("REV", "'main'")).stdout.strip()
    assert moved != first and len(moved) == 40
    assert client(hub, show.replace("REV", repr(first))).stdout.strip() == first  # v1 still has it


def test_get_paths_info_and_the_tree(hub):
    done = client(hub, "print(json.dumps([[type(e).__name__, e.path, getattr(e, 'size', None)] for e in "
                       "hh.HfApi().get_paths_info('acme/tiny', ['config.json', 'tok', 'missing'])]))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '[["RepoFile", "config.json", 24], ["RepoFolder", "tok", null]]'


@pytest.mark.parametrize("code, error", [
    ("hh.HfApi().model_info('acme/tiny', revision='no-such-branch')", "RevisionNotFoundError"),
    ("hh.hf_hub_download('acme/tiny', 'config.json', revision='no-such-branch')", "RevisionNotFoundError"),
    ("hh.HfApi().model_info('acme/none')", "RepositoryNotFoundError"),
    ("hh.snapshot_download('acme/none')", "RepositoryNotFoundError"),
    ("hh.hf_hub_download('acme/tiny', 'none.txt')", "RemoteEntryNotFoundError"),
])
def test_an_unknown_repo_revision_or_file_is_the_clients_own_error(hub, code, error):
    assert error_of(hub, code) == error


def test_a_gated_repo_refuses_its_files_without_a_token_and_gives_them_with_one(hub):
    hub["faults"].gated.add("acme/tiny")
    assert error_of(hub, "hh.hf_hub_download('acme/tiny', 'config.json')") == "GatedRepoError"
    assert client(hub, "print(hh.HfApi().model_info('acme/tiny').gated)").stdout.strip() == "manual"
    assert error_of(hub, "hh.hf_hub_download('acme/tiny', 'config.json')", token="hf_" + "x" * 34) == ""


def test_a_cut_download_resumes_from_what_it_received(hub):
    weights = bytes(range(256)) * (CHUNK // 256 + 4096)  # a whole chunk and 1 MiB more
    make_repo(hub["root"] / "acme" / "tiny", weights)
    hub["faults"].cut["acme/tiny"] = CHUNK + 1000
    done = client(hub, "print(hh.hf_hub_download('acme/tiny', 'model.safetensors'))")
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(Path(done.stdout.strip()).read_bytes()).digest() == hashlib.sha256(weights).digest()
    storage = [line.split()[2:] for line in requests(hub) if line.startswith("GET /model/acme/tiny/")]
    assert storage == [["200"], ["206", f"bytes={CHUNK}-"]]  # cut, then the rest from the last whole chunk


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
