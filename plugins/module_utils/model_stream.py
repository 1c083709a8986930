# -*- coding: utf-8 -*-
"""The verified raw stream of a models sync (docs/models-on-macs.md, "The transport"): a sender's one-shot
listener on its cable addresses, a receiver that hashes every byte while it writes under a temporary name and puts
a file under its final name only when it matches its pin.

Stdlib only, Python 3.9 compatible: the model_copy module runs both ends on the Macs, and the controller runs the
sending end for the first copy (plugin_utils.models.sync_serve).

The protocol, on one TCP connection per receiver and sender: the receiver sends the run's one-time token as a
line, then per file a JSON line ``["GET", model, path, offset]`` and reads ``OK <length>`` and the bytes from
OFFSET to the file's end, or ``NO <why>``, after any number of ``WAIT`` lines (the sender is still receiving that
file itself); ``["BYE"]`` ends it. A sender serves only the pinned files it was told of, by name, and
a file it is still receiving only once it verified it.
"""

from __future__ import absolute_import, division, print_function

import errno
import hmac
import json
import os
import socket
import threading
import time

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files

__metaclass__ = type

_CHUNK = 1 << 20
# A peer silent this long is dead: the copy fails (it resumes at the next sync) and a listener no receiver talks to
# ends, so nothing keeps running on a Mac whose controller or neighbour went away (Ctrl-C, a pulled cable).
IDLE_SECONDS = 30
# Until its first receiver came, a listener waits longer, and a receiver tries this long to reach its sender: the
# Macs' parts start at once but each through its own ssh session, slow on a loaded controller.
STARTUP_SECONDS = 120
# connect()'s errors that say the sender cannot be reached at all, as against refused (up, not listening yet).
UNREACHABLE = (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTDOWN)
KEEPALIVE_SECONDS = 5  # while a sender waits for a file still arriving, it says so this often
HUB_PART_SUFFIX = ".incomplete"  # huggingface_hub's own name for a blob being downloaded (file_download.py)


def nothing_copied():
    """What a Mac's part of a sync says when it copied nothing (the model_copy module's fact)."""
    return {"received": [], "failed": [], "refs": [], "bytes": 0, "seconds": 0, "served_bytes": 0}


class CopyFailed(Exception):
    """One file could not be copied: why, in a few words."""


class FileRefused(CopyFailed):
    """One file could not be copied, but the connection is still in step: the next file may be asked for."""


def stored_path(manifest, root, pinned):
    """Where a pinned file's bytes are stored on a Mac: a Hub entry's blob, a path entry's file."""
    if manifest["source"] == model_files.HUB:
        return model_files.blob_path(root, pinned)
    return model_files.file_path(manifest, root, pinned)


def part_path(manifest, final):
    """The temporary name a file is written under until it is verified."""
    if manifest["source"] == model_files.HUB:
        return final + HUB_PART_SUFFIX
    folder, name = os.path.split(final)
    return os.path.join(folder, "." + name + ".mlx-fleet-part")


ARRIVING = object()  # Holdings.wait: the file is still arriving


class Holdings:
    """The files a sender may serve, by (model, path): ready (their stored path), still arriving, or failed."""

    def __init__(self):
        self._files = {}
        self._changed = threading.Condition()

    def ready(self, key, path):
        with self._changed:
            self._files[key] = path
            self._changed.notify_all()

    def arriving(self, key):
        with self._changed:
            self._files[key] = None

    def failed(self, key):
        with self._changed:
            self._files[key] = False
            self._changed.notify_all()

    def wait(self, key, deadline):
        """The stored path of KEY once it is ready; None when it is unknown or failed; ARRIVING when it is still
        arriving at DEADLINE."""
        with self._changed:
            while self._files.get(key, False) is None and time.monotonic() < deadline:
                self._changed.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            found = self._files.get(key)
            return ARRIVING if found is None and key in self._files else (found or None)


def _read_line(reader):
    line = reader.readline(4096)
    if not line.endswith(b"\n"):
        raise CopyFailed("the peer closed the connection")
    return line.decode("utf-8", "replace").rstrip("\n")


def _request(line):
    """A receiver's request: ["BYE"] or ["GET", model, path, offset]; CopyFailed for anything else."""
    try:
        request = json.loads(line)
    except ValueError:
        raise CopyFailed("not a request")
    if request == ["BYE"]:
        return request
    if (not isinstance(request, list) or len(request) != 4 or request[0] != "GET"
            or not all(isinstance(part, str) for part in request[1:3])
            or not isinstance(request[3], int) or request[3] < 0):
        raise CopyFailed("not a request")
    return request


class Sender:
    """A one-shot listener on ADDRESSES:PORT serving HOLDINGS to CLIENTS receivers that show TOKEN, until each said
    BYE, DEADLINE (time.monotonic) passed, or no receiver was heard of for IDLE_SECONDS (STARTUP seconds before
    the first came). Serves in threads; `wait` joins them and returns the bytes sent."""

    def __init__(self, addresses, port, token, holdings, clients, deadline, startup=STARTUP_SECONDS):
        self.token, self.holdings, self.clients, self.deadline = token.encode(), holdings, clients, deadline
        self._silence = startup  # IDLE_SECONDS once a receiver came
        self.sent = 0
        self._lock = threading.Lock()
        self._done = 0
        self._active = 0  # connections being served
        self._heard = time.monotonic()  # when a receiver last connected or asked
        self._sockets = []
        for address in addresses:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(clients)
            listener.settimeout(0.5)
            self._sockets.append(listener)
        self.port = self._sockets[0].getsockname()[1] if self._sockets else port
        self._threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self._sockets]
        for thread in self._threads:
            thread.start()

    def _finished(self):
        now = time.monotonic()
        with self._lock:
            silent = not self._active and now - self._heard > self._silence
            return self._done >= self.clients or now >= self.deadline or silent

    def _heard_from(self, active=0):
        with self._lock:
            self._heard = time.monotonic()
            self._active += active
            self._silence = IDLE_SECONDS

    def _accept(self, listener):
        handlers = []
        try:
            while not self._finished():
                try:
                    conn = listener.accept()[0]
                except socket.timeout:
                    continue
                handler = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                handler.start()
                handlers.append(handler)
        finally:
            listener.close()
        for handler in handlers:
            handler.join(max(0.0, self.deadline - time.monotonic()))

    def _serve(self, conn):
        conn.settimeout(IDLE_SECONDS)
        self._heard_from(1)
        try:
            with conn, conn.makefile("rb") as reader:
                if not hmac.compare_digest(_read_line(reader).encode(), self.token):
                    return  # not this run's receiver: nothing is served
                while True:
                    request = _request(_read_line(reader))
                    if request[0] == "BYE":
                        with self._lock:
                            self._done += 1
                        return
                    self._heard_from()
                    self._send_file(conn, request)
        except (CopyFailed, OSError):
            return
        finally:
            self._heard_from(-1)

    def _send_file(self, conn, request):
        path = ARRIVING
        while path is ARRIVING and time.monotonic() < self.deadline:
            until = min(self.deadline, time.monotonic() + KEEPALIVE_SECONDS)
            path = self.holdings.wait((request[1], request[2]), until)
            if path is ARRIVING:
                conn.sendall(b"WAIT\n")
        if path is None or path is ARRIVING:
            conn.sendall(b"NO not held\n")
            return
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            offset = min(request[3], size)
            conn.sendall("OK {0}\n".format(size - offset).encode())
            conn.sendfile(handle, offset, size - offset)
        with self._lock:
            self.sent += size - offset

    def wait(self):
        for thread in self._threads:
            thread.join(max(0.0, self.deadline - time.monotonic()) + 1)
        return self.sent


class Receiver:
    """One connection to a sender, for the files one Mac pulls from it: each hashed while written under its
    temporary name, resumed from the bytes already there, renamed into place only when it matches its pin."""

    def __init__(self, address, port, token, deadline):
        wait = 0.2
        given_up = min(deadline, time.monotonic() + STARTUP_SECONDS)
        unreachable_since = None
        while True:  # the sender may still be starting its listener
            tried = time.monotonic()
            try:
                self.conn = socket.create_connection((address, port), timeout=IDLE_SECONDS)
                break
            except OSError as exc:
                now = time.monotonic()
                # A sender that refuses is up and still starting its listener: waited for up to STARTUP_SECONDS. One
                # with no route to it or silent (its cable pulled, the Mac off) is given up after IDLE_SECONDS of that.
                if isinstance(exc, socket.timeout) or exc.errno in UNREACHABLE:
                    unreachable_since = unreachable_since or tried
                    if now + wait >= min(given_up, unreachable_since + IDLE_SECONDS):
                        raise CopyFailed("no route to {0}:{1} for {2} s ({3})".format(
                            address, port, IDLE_SECONDS, exc.strerror or "timed out"))
                else:
                    unreachable_since = None
                if now + wait >= given_up:
                    raise CopyFailed("no listener at {0}:{1}".format(address, port))
                time.sleep(wait)
                wait = min(wait * 2, 2.0)
        self.reader = self.conn.makefile("rb")
        self.conn.sendall(token.encode() + b"\n")

    def fetch(self, manifest, pinned, final):
        """Copy one pinned file to FINAL; the bytes that crossed the wire. CopyFailed when it cannot be verified
        (its temporary file removed: ours) or the peer fails (the temporary file kept, for the next resume)."""
        part = part_path(manifest, final)
        folder = os.path.dirname(final)
        if not os.path.isdir(folder):
            os.makedirs(folder)
        git = model_files.pinned_by_git(pinned)
        digester = model_files.Digester(pinned["size"], git)
        offset = 0
        if os.path.isfile(part):
            with open(part, "rb") as handle:
                offset = digester.feed(handle, pinned["size"])
            if os.path.getsize(part) > pinned["size"]:
                os.remove(part)
                digester, offset = model_files.Digester(pinned["size"], git), 0
        self.conn.sendall(json.dumps(["GET", manifest["name"], pinned["path"], offset]).encode() + b"\n")
        answer = ["WAIT"]
        while answer == ["WAIT"]:  # the sender is still receiving the file itself
            answer = _read_line(self.reader).split(" ", 1)
        if answer[0] != "OK" or not answer[1].isdigit():
            if answer[0] == "NO":
                raise FileRefused("the sender has no verified copy")
            raise CopyFailed("the sender's answer is odd")
        length = int(answer[1])
        if offset + length != pinned["size"]:
            self._drain(length)
            os.remove(part)
            raise FileRefused("the sender's file is {0} bytes, not the pinned {1}".format(offset + length,
                                                                                          pinned["size"]))
        with open(part, "ab") as out:
            moved = self._copy(out, digester, length)
            out.flush()
            os.fsync(out.fileno())
        put_in_place(pinned, digester.digests(), part, final)
        return moved

    def _copy(self, out, digester, length):
        moved = 0
        while moved < length:
            # read1: what arrived, not a full chunk, so a cut stream leaves every byte it brought for the resume
            chunk = self.reader.read1(min(_CHUNK, length - moved))
            if not chunk:
                raise CopyFailed("the sender stopped after {0} of {1} bytes".format(moved, length))
            digester.update(chunk)
            out.write(chunk)
            moved += len(chunk)
        return moved

    def _drain(self, length):
        while length > 0:
            chunk = self.reader.read(min(_CHUNK, length))
            if not chunk:
                return
            length -= len(chunk)

    def close(self):
        try:
            self.conn.sendall(b'["BYE"]\n')
        except OSError:
            pass
        self.reader.close()
        self.conn.close()


def put_in_place(pinned, digests, part, final):
    """PART, of DIGESTS, renamed to FINAL when they are the pinned file's; else removed (it is the sync's own):
    FileRefused."""
    if not model_files.digests_match(pinned, digests):
        os.remove(part)
        raise FileRefused("its bytes do not hash to the pin")
    os.rename(part, final)


def link_snapshot(manifest, root, pinned):
    """A Hub file's snapshot entry, a relative link to its blob (as huggingface_hub makes it); True when made.
    A link elsewhere is replaced; anything else there (a file, a folder) is not ours to remove: CopyFailed."""
    entry = model_files.file_path(manifest, root, pinned)
    target = os.path.relpath(model_files.blob_path(root, pinned), os.path.dirname(entry))
    if os.path.islink(entry) and os.readlink(entry) == target:
        return False
    if os.path.lexists(entry) and not os.path.islink(entry):
        raise CopyFailed("its snapshot entry is a file or folder, not a link")
    if not os.path.isdir(os.path.dirname(entry)):
        os.makedirs(os.path.dirname(entry))
    fresh = entry + ".mlx-fleet-link"
    if os.path.lexists(fresh):
        os.remove(fresh)
    os.symlink(target, fresh)
    os.rename(fresh, entry)
    return True


def write_ref(root, revision, commit):
    """refs/<revision> naming COMMIT, the last step of a Hub entry's copy; True when written."""
    if revision is None or revision == commit:
        return False
    path = model_files.ref_path(root, revision)
    try:
        with open(path) as handle:
            if handle.read().strip() == commit:
                return False
    except (IOError, OSError):
        pass
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path + ".mlx-fleet-part", "w") as handle:
        handle.write(commit)
    os.rename(path + ".mlx-fleet-part", path)
    return True
