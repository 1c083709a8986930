"""macsim's Hugging Face Hub stand-in (`mlx-fleet sim hub`): the Hub's HTTP API for the calls huggingface_hub makes,
serving the repos of a folder (hub_repos.py), for HF_ENDPOINT on the controller and the simulated Macs.

What it answers, as huggingface_hub 2.4 asks (hf_api.py, file_download.py, utils/_http.py):
- GET /api/{models,datasets}/REPO[/revision/REV] (`repo_info`; `?blobs=true` is files_metadata): the info JSON with
  `sha` and `siblings` [{rfilename, size, blobId, lfs: {sha256, size, pointerSize}}];
- GET /api/.../REPO/tree/REV[/PATH] (`list_repo_tree`, snapshot_download's listing) and POST .../paths-info/REV
  (`get_paths_info`, form `paths`): [{type, oid, size, path, lfs: {oid, size, pointerSize}}];
- HEAD/GET /[datasets/]REPO/resolve/REV/PATH (`hf_hub_download`): a git file with ETag (its blob id) and
  X-Repo-Commit; an LFS file as a 302 to the storage (here a second port: a host of its own, as the Hub's CDN is,
  so the client takes the metadata from the 302 and follows nothing) with X-Linked-Etag (its sha256),
  X-Linked-Size and X-Repo-Commit; Range answered with 206 and Content-Range (resumes);
- errors as the Hub gives them, X-Error-Code / X-Error-Message and a JSON {"error"}: RepoNotFound (401 without a
  token), RevisionNotFound and EntryNotFound (404), GatedRepo (401 without a token: the repo's files, not its info).

Faults, per repo: gated (a request without `Authorization: Bearer` gets GatedRepo) and cut after N bytes (a
download of a file from its first byte stops at byte N, the connection closed; a resume, a Range from a later byte,
gets the rest: huggingface_hub writes what it received in 10 MiB chunks, so it resumes from the last whole chunk).
Every request is one line of DIR/hub.log (the client's address, method, path, status, the Range asked): the client's
round trips, and who made them (the controller, or a Mac fetching for the cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from mlx_fleet.sim import host
from mlx_fleet.sim.host import SimError
from mlx_fleet.sim.lifecycle import process_alive
from mlx_fleet.sim.hub_repos import DATASETS, HubFolder, RepoNotFound, RevisionNotFound, Snapshot

STATE = "hub.json"
LOG = "hub.log"  # one line per request
OUTPUT = "hub-server.log"  # the process's own output: why it did not start, a handler's traceback
_TYPES = {"models": "model", "datasets": "dataset"}


class Faults:
    def __init__(self, gated=(), cut=None):
        self.gated = set(gated)
        self.cut = dict(cut or {})


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "macsim-hub"

    # -- routing --
    def do_HEAD(self):
        self._route(body=False)

    def do_GET(self):
        self._route(body=True)

    def do_POST(self):
        self._route(body=True)

    def _route(self, body: bool) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        self._status = 0
        try:
            if self.server.role == "cdn":
                self._cdn(parts, body)
            elif parts == ["api", "agent-harnesses"]:  # the client's once-a-day look for its user agent
                self._json({"standardEnvVars": [], "harnesses": {}})
            elif parts[:1] == ["api"] and len(parts) >= 3 and parts[1] in _TYPES:
                self._api(_TYPES[parts[1]], parts[2:], query)
            elif "resolve" in parts[1:3]:
                self._resolve(parts, body)
            else:
                self._error(404, None, "Not Found")
        except RepoNotFound:
            self._error(404 if self._token() else 401, "RepoNotFound", "Repository not found")
        except RevisionNotFound as exc:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {exc.args[0]}")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-answer
        finally:
            wanted = self.headers.get("Range")
            self.server.log(f"{self.client_address[0]} {self.command} {self.path} {self._status}"
                            + (f" {wanted}" if wanted else ""))

    def _api(self, repo_type: str, rest: list[str], query: dict) -> None:
        keyword = next((i for i in (1, 2) if i < len(rest) and rest[i] in ("revision", "tree", "paths-info")), None)
        repo_id = "/".join(rest[:keyword] if keyword else rest)
        if keyword is None:
            return self._json(self._info(self.server.folder.snapshot(repo_type, repo_id, "main"), query))
        what, revision, path = rest[keyword], rest[keyword + 1] if len(rest) > keyword + 1 else "main", \
            "/".join(rest[keyword + 2:])
        snapshot = self.server.folder.snapshot(repo_type, repo_id, revision)
        if what == "revision":
            return self._json(self._info(snapshot, query))
        if what == "tree":
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return self._json(_tree(snapshot, path, recursive))
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        return self._json(_paths_info(snapshot, form.get("paths", [])))

    def _info(self, snapshot: Snapshot, query: dict) -> dict:
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        stamp = datetime.fromtimestamp(snapshot.modified or 0, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        info = {"_id": snapshot.commit[:24], "id": snapshot.repo_id, "author": snapshot.repo_id.split("/")[0],
                "sha": snapshot.commit, "lastModified": stamp, "createdAt": stamp, "private": False,
                "gated": "manual" if self._gated(snapshot) else False, "disabled": False, "downloads": 0, "likes": 0,
                "tags": [], "siblings": [_sibling(f, blobs) for f in snapshot.files],
                "usedStorage": sum(f.size for f in snapshot.files)}
        if snapshot.repo_type == "model":
            info["modelId"] = snapshot.repo_id
        return info

    def _resolve(self, parts: list[str], body: bool) -> None:
        repo_type = "dataset" if parts[0] == DATASETS else "model"
        parts = parts[1:] if repo_type == "dataset" else parts
        at = parts.index("resolve")
        snapshot = self.server.folder.snapshot(repo_type, "/".join(parts[:at]), parts[at + 1] if len(parts) > at + 1 else "")
        found = snapshot.file("/".join(parts[at + 2:]))
        if found is None:
            return self._error(404, "EntryNotFound", "Entry not found")
        if self._gated(snapshot) and not self._token():
            kind = "dataset" if repo_type == "dataset" else "model"
            return self._error(401, "GatedRepo", f"Access to {kind} {snapshot.repo_id} is restricted. You must have "
                                                 "access to it and be authenticated to access it. Please log in.")
        common = {"X-Repo-Commit": snapshot.commit, "Accept-Ranges": "bytes"}
        if found.sha256 is None:
            return self._content(snapshot, found, dict(common, ETag=f'"{found.blob_id}"'), body)
        location = (f"{self.server.cdn_url}/{quote(repo_type)}/{quote(snapshot.repo_id)}/{snapshot.commit}/"
                    f"{quote(found.path)}")
        self._send(302, dict(common, Location=location, ETag=f'"{found.blob_id}"', **{
            "X-Linked-Etag": f'"{found.sha256}"', "X-Linked-Size": str(found.size), "Content-Length": "0"}))

    def _cdn(self, parts: list[str], body: bool) -> None:
        """The storage an LFS file's 302 points to: REPO_TYPE/REPO.../COMMIT/PATH (a signed URL on the Hub)."""
        if len(parts) < 4 or parts[0] not in ("model", "dataset"):
            return self._error(404, None, "Not Found")
        at = next((i for i in (2, 3) if i < len(parts) and len(parts[i]) == 40), None)
        snapshot = self.server.folder.snapshot(parts[0], "/".join(parts[1:at]), parts[at]) if at else None
        found = snapshot.file("/".join(parts[at + 1:])) if snapshot else None
        if found is None:
            return self._error(404, None, "Not Found")
        self._content(snapshot, found, {"ETag": f'"{found.sha256}"', "Accept-Ranges": "bytes"}, body)

    # -- answers --
    def _content(self, snapshot: Snapshot, found, headers: dict, body: bool) -> None:
        """A file's bytes, or the part Range asks for; cut where the repo's fault says."""
        start, end = 0, found.size - 1
        wanted = self.headers.get("Range", "")
        status = 200
        if wanted.startswith("bytes="):
            first, _, last = wanted[6:].split(",")[0].partition("-")
            try:
                start, end = int(first), min(int(last), end) if last else end
            except ValueError:
                start = found.size
            if start >= found.size or start > end:
                return self._error(416, None, "Range Not Satisfiable", {"Content-Range": f"bytes */{found.size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{found.size}"
        length = max(end - start + 1, 0)
        self._send(status, dict(headers, **{"Content-Length": str(length), "Content-Type": "application/octet-stream"}))
        if not body or not length:
            return
        # A download from the first byte is cut; a resume (a Range from a later byte) gets the rest.
        cut = self.server.faults.cut.get(snapshot.repo_id)
        stop = cut if cut is not None and start == 0 and cut <= end else end + 1
        with open(found.disk, "rb") as handle:
            handle.seek(start)
            left = stop - start
            while left > 0 and (chunk := handle.read(min(left, 1 << 16))):
                self.wfile.write(chunk)
                left -= len(chunk)
        if stop <= end:  # the fault: the rest never comes
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)

    def _json(self, data) -> None:
        payload = json.dumps(data).encode()
        self._send(200, {"Content-Type": "application/json; charset=utf-8", "Content-Length": str(len(payload))})
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _error(self, status: int, code: str | None, message: str, extra: dict | None = None) -> None:
        payload = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json; charset=utf-8", "Content-Length": str(len(payload)),
                   "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, headers)
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send(self, status: int, headers: dict) -> None:
        self._status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _token(self) -> bool:
        return self.headers.get("Authorization", "").startswith("Bearer ")

    def _gated(self, snapshot: Snapshot) -> bool:
        return snapshot.repo_id in self.server.faults.gated

    def log_message(self, format, *args):  # the request log is hub.log's one line per request
        pass


def _sibling(found, blobs: bool) -> dict:
    if not blobs:
        return {"rfilename": found.path}
    sibling = {"rfilename": found.path, "blobId": found.blob_id, "size": found.size}
    if found.sha256:
        sibling["lfs"] = {"sha256": found.sha256, "size": found.size, "pointerSize": found.pointer_size}
    return sibling


def _entry(snapshot: Snapshot, path: str) -> dict | None:
    found = snapshot.file(path)
    if found is None:
        return {"type": "directory", "oid": snapshot.tree_id(path), "size": 0, "path": path} \
            if path in snapshot.folders() else None
    entry = {"type": "file", "oid": found.blob_id, "size": found.size, "path": found.path}
    if found.sha256:
        entry["lfs"] = {"oid": found.sha256, "size": found.size, "pointerSize": found.pointer_size}
    return entry


def _tree(snapshot: Snapshot, folder: str, recursive: bool) -> list[dict]:
    prefix = f"{folder}/" if folder else ""
    paths = [p for p in snapshot.folders() + [f.path for f in snapshot.files] if p.startswith(prefix)]
    if not recursive:
        paths = [p for p in paths if "/" not in p[len(prefix):]]
    return [_entry(snapshot, p) for p in sorted(paths)]


def _paths_info(snapshot: Snapshot, paths: list[str]) -> list[dict]:
    return [entry for entry in (_entry(snapshot, p.strip("/")) for p in paths) if entry]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, role: str, folder: HubFolder, faults: Faults, log):
        super().__init__(address, HubHandler)
        self.role, self.folder, self.faults, self.log = role, folder, faults, log
        self.cdn_url = ""


def serve(folder: str, address: str, port: int, faults: Faults, log_path: Path | None = None):
    """The stand-in's two listeners (the API and its storage), started in threads; (api, cdn) servers."""
    lock = threading.Lock()

    def log(line: str) -> None:
        if log_path:
            with lock, open(log_path, "a") as handle:
                handle.write(line + "\n")

    repos = HubFolder(folder)
    api = _Server((address, port), "api", repos, faults, log)
    cdn = _Server((address, 0), "cdn", repos, faults, log)
    api.cdn_url = f"http://{_url_host(address)}:{cdn.server_address[1]}"
    for server in (api, cdn):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return api, cdn


def endpoint(server) -> str:
    return f"http://{_url_host(server.server_address[0])}:{server.server_address[1]}"


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


# -- the background process `mlx-fleet sim hub` starts and `sim down` stops --

def start(sim_dir: Path, folder: str, address: str, port: int, gated: list[str], cut: dict[str, int],
          lifetime: float) -> dict:
    """Serve FOLDER in a process of its own; what DIR/hub.json records of it (pid, endpoint)."""
    running = status(sim_dir)
    if running:
        raise SimError(f"a Hub stand-in already serves {running['folder']} at {running['endpoint']} (pid "
                       f"{running['pid']}); stop it first: mlx-fleet sim hub --dir {sim_dir} stop")
    if not Path(folder).is_dir():
        raise SimError(f"mlx-fleet sim hub serve: {folder} is not a folder (of ORG/NAME repos)")
    (sim_dir / STATE).unlink(missing_ok=True)
    spec = {"folder": str(Path(folder).resolve()), "address": address, "port": port, "gated": gated, "cut": cut,
            "lifetime": lifetime, "state": str(sim_dir / STATE), "log": str(sim_dir / LOG)}
    with open(sim_dir / OUTPUT, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlx_fleet.sim.hub", json.dumps(spec)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        running = status(sim_dir)
        if running and running["pid"] == proc.pid:
            return running
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    tail = (sim_dir / OUTPUT).read_text(errors="replace").strip().splitlines()[-1:]
    raise SimError(f"the Hub stand-in did not start at {address}:{port}: {' '.join(tail) or 'no output'}")


def status(sim_dir: Path) -> dict | None:
    """DIR/hub.json while its process lives (that pid still the stand-in: never another process that reused it)."""
    try:
        running = json.loads((sim_dir / STATE).read_text())
        alive = isinstance(running, dict) and process_alive(running.get("pid"))
        if alive and b"mlx_fleet.sim.hub" in Path(f"/proc/{running['pid']}/cmdline").read_bytes():
            return running
    except (OSError, ValueError):
        pass
    return None


def stop(sim_dir: Path) -> dict | None:
    """End the stand-in of DIR (its sockets close with it); what it was, or None when none ran."""
    running = status(sim_dir)
    if running:
        os.kill(running["pid"], signal.SIGTERM)
        for _ in range(100):
            if not process_alive(running["pid"]):
                break
            time.sleep(0.05)
    (sim_dir / STATE).unlink(missing_ok=True)
    return running


def _main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    api, cdn = serve(spec["folder"], spec["address"], spec["port"], Faults(spec["gated"], spec["cut"]),
                     Path(spec["log"]))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    state = Path(spec["state"])
    host.write_file(state, json.dumps({"pid": os.getpid(), "endpoint": endpoint(api), "storage": endpoint(cdn),
                                       "folder": spec["folder"], "gated": sorted(spec["gated"]), "cut": spec["cut"],
                                       "until": time.time() + spec["lifetime"]}))
    done.wait(spec["lifetime"])
    for server in (api, cdn):
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="macsim's Hub stand-in (started by mlx-fleet sim hub serve)")
    parser.add_argument("spec")
    _main(parser.parse_args().spec)
