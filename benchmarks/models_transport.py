"""The first copy of a model between two simulated Macs over one Thunderbolt cable, by each candidate transport
(issue 28; the choice is argued in docs/models-on-macs.md). Root, on a 2-Mac sim of its own (as `make bench` runs
it), or on a converged sim (`mlx-fleet sim up`, then `mlx-fleet hostfile -i DIR/inventory.yml` so the cable has its
/30):

    python benchmarks/models_transport.py [--dir DIR [--sender mini-1] [--receiver mini-2]] [--mib 1024] [--rounds 3]

The receiver pulls from the sender's cable address, interleaved round by round (the order rotates), into a fresh
folder each time:
  rsync+hash  rsync over ssh at protocol 29 with openrsync's options (-rt --partial), then every file hashed
  tar+hash    one ssh stream of `tar -cf -`, unpacked by the receiver (Python's tarfile) while it hashes every byte
  ssh+hash    one ssh stream of the files, each "name size" then its bytes, hashed (sha256) while written
  raw+hash    one plain TCP stream of the files over the cable (no ssh), hashed while written: the verified floor
  raw         the same stream, not hashed: the floor
CPU seconds are everything both simulated Macs spent: the processes this script ran (their rusage) and what the
sims' sshd reaped of their sessions (utime+stime+cutime+cstime of the processes in both network namespaces).
Prints one line per run and the medians; wall times on a shared machine are noise beside the CPU seconds.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

MODEL = "bench-model"
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "LogLevel=ERROR"]
PORT = 40401
# The receiving end of the tar and raw transports, run by the receiver's python3 (stdlib only, as on a Mac):
# it writes each file under a temporary name, hashes the bytes as they pass, renames it when complete.
RECEIVE = r'''
import hashlib, json, os, socket, sys, tarfile
mode, dest = sys.argv[1], sys.argv[2]
hashing = mode.endswith("+hash")
durable = mode.endswith("+fsync")  # each file on the disk before it is renamed, as a copy that survives a power cut
os.makedirs(dest)
digests = {}
def take(name, stream, size):
    digest = hashlib.sha256() if hashing else None
    part = os.path.join(dest, "." + name + ".part")
    with open(part, "wb") as out:
        left = size
        while left:
            chunk = stream.read(min(1 << 20, left))
            if not chunk:
                raise SystemExit("cut at %s" % name)
            if digest:
                digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.rename(part, os.path.join(dest, name))
    digests[name] = digest.hexdigest() if digest else None
if mode.startswith("tar"):
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|", bufsize=1 << 20) as tar:
        for member in tar:
            if member.isfile():
                take(os.path.basename(member.name), tar.extractfile(member), member.size)
else:
    stream = (sys.stdin.buffer if mode.startswith("ssh") else
              socket.create_connection((sys.argv[3], int(sys.argv[4]))).makefile("rb"))
    while True:
        header = stream.readline()
        if not header:
            break
        name, size = header.decode().rsplit(" ", 1)
        take(name, stream, int(size))
print(json.dumps(digests))
'''
# The sending end of the raw and ssh streams: "name size\n" then the bytes, per file; on one TCP connection
# (sendfile), or on stdout (ssh carries it) when no address is given.
SEND = r'''
import os, shutil, socket, sys
folder = sys.argv[1]
if len(sys.argv) > 2:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((sys.argv[2], int(sys.argv[3])))
    server.listen(1)
    print("ready", flush=True)
    conn, _ = server.accept()
    send, sendfile = conn.sendall, conn.sendfile
else:
    out = sys.stdout.buffer
    send, sendfile = out.write, lambda handle: shutil.copyfileobj(handle, out, 1 << 20)
for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    send(("%s %d\n" % (name, os.path.getsize(path))).encode())
    with open(path, "rb") as handle:
        sendfile(handle)
if len(sys.argv) > 2:
    conn.close()
else:
    out.flush()
'''
HASH_FOLDER = r'''
import hashlib, json, os, sys
out = {}
for name in sorted(os.listdir(sys.argv[1])):
    digest = hashlib.sha256()
    with open(os.path.join(sys.argv[1], name), "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    out[name] = digest.hexdigest()
print(json.dumps(out))
'''


class Bench:
    def __init__(self, folder: Path, sender: str, receiver: str):
        self.dir = folder
        state = json.loads((folder / "state.json").read_text())
        # A node's processes: its sshd listener's network and mount namespaces (its own /opt).
        self.pid = {name: str(node["pid"]) for name, node in state["nodes"].items()}
        self.netns = {name: f"mfs{state['index']}-{name}" for name in state["nodes"]}
        self.sender, self.receiver = sender, receiver
        self.sender_address = self.cable_address(sender)
        self.key = folder / "id_ed25519"
        self.source = f"/opt/mlx-fleet/models/{MODEL}"

    def cable_addresses(self, node: str) -> list[str]:
        """The node's addresses on its Thunderbolt cables (the /30s the fabric gave them)."""
        out = subprocess.run(["ip", "-n", self.netns[node], "-4", "-j", "addr"], capture_output=True, text=True,
                             check=True).stdout
        return [a["local"] for link in json.loads(out) for a in link.get("addr_info", []) if a.get("prefixlen") == 30]

    def cable_address(self, node: str) -> str:
        """The node's address on its (first) Thunderbolt cable."""
        return self.cable_addresses(node)[0]

    def address_toward(self, sender: str, receiver: str) -> str:
        """The sender's address on the cable it shares with the receiver (the /30 both have an address in)."""
        theirs = {ipaddress.ip_interface(f"{a}/30").network for a in self.cable_addresses(receiver)}
        return next(a for a in self.cable_addresses(sender) if ipaddress.ip_interface(f"{a}/30").network in theirs)

    def enter(self, node: str) -> list[str]:
        return ["nsenter", "-t", self.pid[node], "-m", "-n"]

    def on(self, node: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([*self.enter(node), *argv], capture_output=True, text=True, check=True, **kwargs)

    def host_path(self, node: str, path: str) -> Path:
        return self.dir / "nodes" / node / "fs" / path.lstrip("/")

    def ssh(self) -> list[str]:
        return ["ssh", "-i", str(self.key), *SSH_OPTIONS]

    def make_model(self, mib: int) -> dict[str, str]:
        """About MIB of random bytes on the sender, as a model is: four safetensors shards, a config, a tokenizer."""
        folder = self.host_path(self.sender, self.source)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        shard = (mib << 20) // 4
        for i in range(1, 5):
            with open(folder / f"model-{i:05d}-of-00004.safetensors", "wb") as handle:
                for _ in range(shard >> 20):
                    handle.write(os.urandom(1 << 20))
        (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
        (folder / "tokenizer.json").write_bytes(os.urandom(2 << 20).hex().encode()[: 2 << 20])
        return json.loads(subprocess.run(["python3", "-c", HASH_FOLDER, str(folder)], capture_output=True,
                                         text=True, check=True).stdout)

    def netns_cpu(self) -> float:
        """CPU seconds of the processes in both Macs' namespaces, with what they reaped (sshd's sessions)."""
        total = 0
        for node in (self.sender, self.receiver):
            pids = subprocess.run(["ip", "netns", "pids", self.netns[node]], capture_output=True, text=True).stdout
            for pid in pids.split():
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        return total / os.sysconf("SC_CLK_TCK")

    def run(self, method: str, dest: str) -> dict[str, str]:
        """Copy the model to DEST on the receiver by METHOD; the receiver's digests (hashed by the transport, or
        after it for rsync)."""
        src = f"admin@{self.sender_address}"
        if method == "rsync+hash":
            self.on(self.receiver, ["rsync", "--protocol=29", "-rt", "--partial", "-e", " ".join(self.ssh()),
                                    f"{src}:{self.source}/", dest + "/"])
            return json.loads(self.on(self.receiver, ["python3", "-c", HASH_FOLDER, dest]).stdout)
        if method in ("tar+hash", "ssh+hash"):
            remote = (f"tar -cf - -C {self.source} ." if method == "tar+hash" else
                      f"python3 -c {shlex.quote(SEND)} {self.source}")
            sender = subprocess.Popen([*self.enter(self.receiver), *self.ssh(), src, remote], stdout=subprocess.PIPE)
            received = self.on(self.receiver, ["python3", "-c", RECEIVE, method, dest], stdin=sender.stdout)
            sender.stdout.close()
            assert sender.wait() == 0
            return json.loads(received.stdout)
        sender = self.listening_sender(self.sender, self.sender_address, PORT)
        received = self.on(self.receiver, ["python3", "-c", RECEIVE, method, dest, self.sender_address, str(PORT)])
        assert sender.wait() == 0
        return json.loads(received.stdout)

    def listening_sender(self, sender: str, address: str, port: int) -> subprocess.Popen:
        """The raw stream's sending end on SENDER, listening at ADDRESS:PORT for one receiver."""
        process = subprocess.Popen([*self.enter(sender), "python3", "-c", SEND, self.source, address, str(port)],
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready"
        return process

    def raw_at_once(self, copies: list[tuple[str, str]], expected: dict[str, str]) -> float:
        """One raw stream per (sender, receiver) of COPIES, all at once, each from the sender's copy at the model's
        path over the cable the two share, into a fresh folder, each file on the receiver's disk (fsync) before it
        is renamed: the floor of those copies made side by side on the same CPUs and disk (every stream runs from
        the start, even one whose sender would first have to receive). Seconds."""
        dest = f"/opt/mlx-fleet/models/{MODEL}-copy"
        senders, receivers = [], []
        for port, (sender, receiver) in enumerate(copies, PORT):
            shutil.rmtree(self.host_path(receiver, dest), ignore_errors=True)
            self.host_path(receiver, dest).parent.mkdir(parents=True, exist_ok=True)
            address = self.address_toward(sender, receiver)
            senders.append(self.listening_sender(sender, address, port))
            receivers.append([*self.enter(receiver), "python3", "-c", RECEIVE, "raw+fsync", dest, address,
                              str(port)])
        started = time.monotonic()
        running = [subprocess.Popen(argv, stdout=subprocess.DEVNULL) for argv in receivers]
        assert [p.wait() for p in running + senders] == [0] * (2 * len(copies)), "a raw stream failed"
        seconds = time.monotonic() - started
        for _, receiver in copies:
            copied = {p.name for p in self.host_path(receiver, dest).iterdir()}
            assert copied == set(expected), f"raw to {receiver}: {sorted(copied)}"
            shutil.rmtree(self.host_path(receiver, dest))
        return seconds

    def measure(self, method: str, expected: dict[str, str], mib: int) -> dict:
        dest = f"/opt/mlx-fleet/models/{MODEL}-copy"
        shutil.rmtree(self.host_path(self.receiver, dest), ignore_errors=True)
        self.host_path(self.receiver, dest).parent.mkdir(parents=True, exist_ok=True)
        cpu_before = self.netns_cpu()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        digests = self.run(method, dest)
        seconds = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        time.sleep(0.5)  # the sshd listeners reap their finished sessions (their CPU lands in cutime)
        cpu = (after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
               + self.netns_cpu() - cpu_before)
        if method != "raw":
            assert digests == expected, f"{method}: the receiver's hashes differ"
        copied = {p.name for p in self.host_path(self.receiver, dest).iterdir()}
        assert copied == set(expected), f"{method}: {sorted(copied)}"
        shutil.rmtree(self.host_path(self.receiver, dest))
        return {"method": method, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                "mib_per_s": round(mib / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="a converged sim's folder (default: a 2-Mac sim of its own, as "
                                                 "`make bench` runs it)")
    parser.add_argument("--sender", default="mini-1")
    parser.add_argument("--receiver", default="mini-2")
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.dir:
        compare(Bench(args.dir.resolve(), args.sender, args.receiver), args)
        return
    from bench import Cluster

    root = Path(tempfile.mkdtemp(prefix="mlx-fleet-bench-transport-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        with Cluster(root, 2, "line") as cluster:
            subprocess.run(cluster.mlx_fleet("hostfile"), check=True, capture_output=True, stdin=subprocess.DEVNULL,
                           cwd="/")  # the cable's /30
            compare(Bench(cluster.dir.resolve(), *cluster.nodes), args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def compare(bench: Bench, args) -> None:
    """Every method over the bench's cable, round by round, then the medians."""
    expected = bench.make_model(args.mib)
    total_mib = sum(p.stat().st_size for p in bench.host_path(bench.sender, bench.source).iterdir()) / (1 << 20)
    methods = ["rsync+hash", "tar+hash", "ssh+hash", "raw+hash", "raw"]
    print(f"# {bench.sender} -> {bench.receiver} over {bench.sender_address}/30, {total_mib:.0f} MiB in "
          f"{len(expected)} files, {args.rounds} rounds interleaved; rsync: "
          + subprocess.run(["rsync", "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    results = []
    for round_number in range(args.rounds):
        for method in methods[round_number % len(methods):] + methods[:round_number % len(methods)]:
            result = dict(bench.measure(method, expected, total_mib), round=round_number + 1)
            print(json.dumps(result), flush=True)
            results.append(result)
    print("# medians: method, wall s, CPU s (both Macs), MiB/s")
    for method in methods:
        mine = [r for r in results if r["method"] == method]
        print(f"{method:11s} {statistics.median(r['seconds'] for r in mine):7.2f} "
              f"{statistics.median(r['cpu_seconds'] for r in mine):7.2f} "
              f"{statistics.median(r['mib_per_s'] for r in mine):8.1f}")
    shutil.rmtree(bench.host_path(bench.sender, bench.source))


if __name__ == "__main__":
    main()
