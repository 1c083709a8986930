"""What MLX's error messages mean on a Mac cluster (docs/troubleshooting.md): one knowledge base for
`mlx-fleet explain` and `verify`'s diagnosis.

Each rule is a message MLX (or macOS, ssh, exo) prints, as its source writes it, with the causes it can
have, most likely first; a message that several causes produce names them all, and the first line says
the two likeliest (``cause: WORD or WORD``) rather than a guess. What the Macs show now (the watch's
findings, mlx_fleet.watch) narrows the causes. Pure Python: nothing here reads a file or a Mac.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import MIXED_BUILDS, lines

CAUSES = ("bridge", "no-ipv4", "rdma-off", "no-rdma-hardware", "hostfile", "stale-rdma", "rdma-limits", "peer-lost",
          "launch-env", "network", "os-mismatch", "mlx-version", "gpu-wedged")

# Per cause: what it is, what to collect on each Mac (exact commands; HOST is the Mac), and the fix (its commands
# as plugin_utils.base.fixes.fill templates: {site}, {checklist}, ... in the install's form, {inventory} the inventory).
MEANING = {
    "bridge": "the Thunderbolt Bridge is on: the cabled ports are bridge0's members, so their own addresses and "
              "RDMA's GIDs do not work point to point",
    "no-ipv4": "a Thunderbolt port lacks the IPv4 address the fabric gave it (an update, a network manager or a "
               "hand edit removed it; RDMA's IPv4-mapped GID goes with it)",
    "rdma-off": "RDMA is disabled on a Mac (rdma_ctl status: disabled, no rdma_enX devices)",
    "no-rdma-hardware": "the Mac or cable cannot do RDMA: Thunderbolt 4, a dock or hub in between, or a macOS "
                        "before 26.2 (no librdma)",
    "hostfile": "the hostfile does not match the cluster (a rank's address, RDMA device or host is wrong or missing)",
    "stale-rdma": "the RDMA stack is wedged on a Mac (queue pairs cannot change state, ibv_devinfo hangs); it "
                  "comes back only with a restart",
    "rdma-limits": "an RDMA resource limit was reached (queue pairs per device, registered memory)",
    "peer-lost": "a rank lost its peer mid-run: the peer crashed or was stopped, or the cable between them went out",
    "launch-env": "mlx.launch or the ranks' environment is wrong (MLX_RANK, MLX_HOSTFILE, MLX_IBV_DEVICES, "
                  "MLX_JACCL_COORDINATOR, the interpreter)",
    "network": "a Mac cannot be reached (ssh, or the coordinator's address over the management network)",
    "os-mismatch": f"the Macs run different macOS builds ({MIXED_BUILDS}), or one too old for RDMA",
    "mlx-version": "an MLX version with a known bug, or different MLX versions on the Macs",
    "gpu-wedged": "the GPU stopped answering (a Metal command buffer timed out); with MLX_METAL_FAST_SYNCH set "
                  "it can stay wedged until a restart",
}

EVIDENCE = {
    "bridge": ["ssh HOST networksetup -listnetworkserviceorder   # '(*) Thunderbolt Bridge' is off",
               "ssh HOST ifconfig bridge0   # no 'member:' lines and status: inactive when off"],
    "no-ipv4": ["ssh HOST ifconfig   # each cabled enX has its inet from OUTPUT_DIR/cluster.json",
                "ssh HOST ibv_devinfo -v   # each port's GID table holds ::ffff:<its IPv4>"],
    "rdma-off": ["ssh HOST rdma_ctl status   # enabled", "ssh HOST ibv_devices   # lists rdma_enX"],
    "no-rdma-hardware": ["ssh HOST sw_vers   # 26.2 or later",
                         "ssh HOST system_profiler SPThunderboltDataType   # Speed: Up to 120 Gb/s (Thunderbolt 5) "
                         "and the peer directly under the port, no dock"],
    "hostfile": ["cat OUTPUT_DIR/hostfile.json   # the backend, each rank's ips and rdma devices",
                 "mlx-fleet audit -i INVENTORY   # the Macs' copies against the controller's"],
    "stale-rdma": ["ssh HOST ibv_devinfo   # answers within a second with PORT_ACTIVE on cabled ports",
                   "mlx-fleet watch -i INVENTORY --once   # says stale-rdma when ibv_devinfo hangs"],
    "rdma-limits": ["ssh HOST ps -ax -o pid,command | grep -i python   # stray ranks still holding queue pairs",
                    "ssh HOST sysctl iogpu.wired_limit_mb"],
    "peer-lost": ["mlx-fleet watch -i INVENTORY --once   # a Mac down or a cable out names both ends",
                  "the other ranks' output: the first rank that failed is the cause, the others lost it"],
    "launch-env": ["the launch command and its hostfile (mlx.launch --verbose prints the environment it sets)",
                   "ssh HOST /opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.__version__)'"],
    "network": ["ssh -o BatchMode=yes HOST true", "ping -c 3 HOST"],
    "os-mismatch": ["ssh HOST sw_vers   # the same ProductVersion and BuildVersion on every Mac"],
    "mlx-version": ["ssh HOST /opt/mlx-fleet/venv/bin/python -m pip show mlx   # the same version on every Mac",
                    "mlx-fleet audit -i INVENTORY   # every package against the lock"],
    "gpu-wedged": ["ssh HOST /opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.ones(4).sum())'"
                   "   # hangs when the GPU is wedged",
                   "grep -n MLX_METAL_FAST_SYNCH OUTPUT_DIR/hostfile.json   # MLX's docs now say leave it unset"],
}

FIX = {
    "bridge": "{site} (the fabric step turns the Thunderbolt Bridge off)",
    "no-ipv4": "{site} (the fabric step puts the addresses back); if it comes back, look "
               "for a network manager resetting the ports (exo's io.exo.networksetup LaunchDaemon)",
    "rdma-off": "the Recovery step: {checklist}, then {site}",
    "no-rdma-hardware": "use the TCP ring (mlx_fleet_backend: ring or auto), or direct Thunderbolt 5 cables between "
                        "Thunderbolt 5 Macs on macOS 26.2 or later",
    "hostfile": "{hostfile}, and launch with OUTPUT_DIR/hostfile.json",
    "stale-rdma": "restart the Macs whose ibv_devinfo hangs or whose queue pairs fail (all of the job's Macs if "
                  "unsure), then run again",
    "rdma-limits": "stop stray ranks (they hold queue pairs), use fewer connections per device, and check the wired "
                   "limit; restart the Mac if the count does not come back",
    "peer-lost": "find the rank that failed first (its own message is the cause); check the cables and Macs with "
                 "mlx-fleet watch -i {inventory} --once",
    "launch-env": "launch with mlx.launch --hostfile OUTPUT_DIR/hostfile.json --backend as the hostfile says, with "
                  "the cluster's interpreter; do not set MLX_RANK or MLX_HOSTFILE by hand",
    "network": "bring the Mac back on the network (power, sleep, cable), check `ssh HOST` works without a prompt",
    "os-mismatch": "update macOS so every Mac runs the same build (26.2 or later)",
    "mlx-version": "{lock}, then {env} (one MLX "
                   "version everywhere, one without the bug)",
    "gpu-wedged": "restart the Mac; remove MLX_METAL_FAST_SYNCH from mlx_fleet_envs and the hostfile's env",
}

# The watch's finding kinds that confirm a cause when the Macs are read (explain -i).
CONFIRMED_BY = {
    "bridge": ("bridge",), "no-ipv4": ("no-ipv4", "rdma-gid", "network-manager"), "rdma-off": ("rdma-off",),
    "stale-rdma": ("stale-rdma", "rdma-port"), "network": ("unreachable", "default-route"), "peer-lost": ("cable", "moved", "unreachable"),
    "os-mismatch": ("os-mismatch",), "mlx-version": ("environment-mismatch",), "gpu-wedged": ("fast-synch",),
}


@dataclass(frozen=True)
class Rule:
    pattern: str  # a regular expression searched in each line
    causes: tuple[str, ...]  # most likely first
    says: str  # what the message means, in words
    source: str  # where the wording comes from
    example: str  # one message as MLX prints it (docs/troubleshooting.md lists them)
    weight: int = 2  # 1: a consequence other lines explain better (mlx.launch's "exited with code")

    def search(self, line: str):
        return re.search(self.pattern, line)


RULES = (
    # mlx/distributed/jaccl/utils.cpp Connection::queue_pair_rtr/_rts/_init; exo-explore/exo#1847 (errno 22 on all
    # nodes until a reboot), ml-explore/mlx#3467 (a GID selection regression in MLX), exo-explore/exo#1390.
    Rule(r"\[jaccl\] Changing queue pair to (RTR|RTS|INIT) failed with errno (\d+)",
         ("stale-rdma", "no-ipv4", "bridge", "mlx-version", "os-mismatch"),
         "JACCL could not bring an RDMA queue pair up with its peer",
         "mlx/distributed/jaccl/utils.cpp; exo-explore/exo#1847, ml-explore/mlx#3467",
         "[jaccl] Changing queue pair to RTR failed with errno 22"),
    # ml-explore/mlx#4209 (Thunderbolt RDMA devices allow ten queue pairs; the eleventh fails with EBUSY).
    Rule(r"\[jaccl\] (Couldn't create queue pair|Creating the queue pair failed with errno \d+)",
         ("rdma-limits", "stale-rdma"), "JACCL could not create an RDMA queue pair",
         "mlx/distributed/jaccl/utils.cpp Connection::create_queue_pair; ml-explore/mlx#4209",
         "[jaccl] Creating the queue pair failed with errno 16"),
    Rule(r"\[jaccl\] Register memory region failed", ("rdma-limits", "stale-rdma"),
         "JACCL could not register its buffers with the RDMA device",
         "mlx/distributed/jaccl/utils.cpp SharedBuffer::register_to_protection_domain",
         "[jaccl] Register memory region failed"),
    # ml-explore/mlx#3207: after many init/teardown cycles only a reboot clears it; ml-explore/mlx#4530: a port that
    # is PORT_DOWN opens but gives no protection domain; exo-explore/exo#2111 (mid-run, with Recv errno=2).
    Rule(r"\[jaccl\] Couldn't allocate protection domain", ("stale-rdma", "rdma-off", "no-rdma-hardware"),
         "JACCL could not allocate an RDMA protection domain on a device",
         "mlx/distributed/jaccl/utils.cpp; ml-explore/mlx#3207, ml-explore/mlx#4530",
         "[jaccl] Couldn't allocate protection domain"),
    # ml-explore/mlx#3777, exo-explore/exo#2186, #1843: with no RDMA device JACCL crashed registering its buffers (a
    # null protection domain); the crash report's frame names JACCL's function (a bare ibv_reg_mr is any RDMA program's).
    Rule(r"\[jaccl\] (Couldn't create completion queue|Could not open device)"
         r"|jaccl::SharedBuffer::register_to_protection_domain",
         ("rdma-off", "no-rdma-hardware", "stale-rdma"), "JACCL found no usable RDMA device (a crash in its buffer registration)",
         "mlx/distributed/jaccl/utils.cpp; macOS crash report; ml-explore/mlx#3777, exo-explore/exo#2186, #1843",
         "libjaccl.dylib    jaccl::SharedBuffer::register_to_protection_domain(ibv_pd*)"),
    # A crash report (.ips or its text backtrace) in Apple's Thunderbolt RDMA driver: ml-explore/mlx#4192 (the cable
    # unplugged mid-collective kills both ranks), ml-explore/mlx#4319 and exo-explore/exo#1847 (ports still up).
    Rule(r"\btbt_post_(recv|send)\b", ("peer-lost", "stale-rdma"),
         "a rank crashed (SIGSEGV) in the Thunderbolt RDMA driver while posting to a queue pair: the link or the peer "
         "went away under it", "macOS crash report; ml-explore/mlx#4192, ml-explore/mlx#4319, exo-explore/exo#1847",
         "libthunderboltrdma.dylib  tbt_post_recv"),
    # sample(1) / spindump of a hung rank: JACCL has no timeout, the survivors spin in recv and print nothing
    # (ml-explore/mlx#3910, #4278).
    Rule(r"jaccl::(MeshImpl|RingImpl)::(recv|send)\(", ("peer-lost", "stale-rdma"),
         "a hung rank waits in JACCL for a peer that no longer answers (JACCL has no timeout and prints nothing)",
         "sample or spindump of the rank; ml-explore/mlx#3910, ml-explore/mlx#4278",
         "  jaccl::MeshImpl::recv(char*, long"),
    # mlx.distributed_config check_rdma (mlx/_distributed_utils/config.py); jundot/omlx#3037: a Thunderbolt 4 Mac
    # says enabled and lists no device, for good.
    Rule(r"does not seem to have RDMA enabled|Some of the hosts don't have RDMA enabled|No IB devices found",
         ("rdma-off", "no-rdma-hardware"), "a Mac lists no RDMA device",
         "mlx/_distributed_utils/config.py check_rdma; jundot/omlx#3037",
         "[ERROR] mini-2 does not seem to have RDMA enabled"),
    # The dyld error of a binary linked to librdma on a macOS before 26.2 (unslothai/llama.cpp#131).
    Rule(r"Library not loaded: /usr/lib/librdma\.dylib", ("os-mismatch", "no-rdma-hardware"),
         "the Mac's macOS has no RDMA library (before 26.2)", "unslothai/llama.cpp#131",
         "dyld[41694]: Library not loaded: /usr/lib/librdma.dylib"),
    # libmlx (mlx/distributed/distributed.cpp, jaccl/no_jaccl.cpp): no backend could start.
    Rule(r"Cannot initialize jaccl distributed backend|\[distributed\] Couldn't initialize any backend",
         ("launch-env", "no-rdma-hardware"), "MLX could not start the distributed backend asked for",
         "mlx/distributed/distributed.cpp, mlx/distributed/jaccl/jaccl.cpp",
         "Cannot initialize jaccl distributed backend."),
    Rule(r"\[ring\] You need to provide via environment variables both a rank \(MLX_RANK\)", ("launch-env",),
         "the ring backend started without MLX_RANK and MLX_HOSTFILE", "mlx/distributed/ring/ring.cpp init",
         "[ring] You need to provide via environment variables both a rank (MLX_RANK) and a hostfile (MLX_HOSTFILE)"),
    # mlx.launch (mlx/_distributed_utils/launch.py, common.py).
    # ml-explore/mlx#4040 (merged 2026-08): the same bad hostfile is a parser error of mlx.launch for every backend.
    Rule(r"The hostfile is malformed|Hostfile .* doesn't exist|Rank 0 should have an IP reachable|"
         r"Hostname cannot be empty|The ring backend requires IPs to be provided instead of hostnames", ("hostfile",),
         "mlx.launch refused the hostfile",
         "mlx/_distributed_utils/launch.py launch_jaccl, common.py Hostfile; ml-explore/mlx#4040",
         "mlx.launch: error: The hostfile is malformed: no RDMA device is listed for mini-1 to mini-2"),
    # EADDRNOTAVAIL (49): the rank's address from the hostfile is not on this Mac.
    Rule(r"\[(ring|jaccl)\] (Couldn't bind socket|Couldn't listen on any resolved address)",
         ("no-ipv4", "hostfile", "bridge"), "a rank could not listen on its address from the hostfile",
         "mlx/distributed/ring/ring.cpp accept_connections, mlx/distributed/utils.cpp TCPSocket::listen",
         "[ring] Couldn't bind socket (error: 49)"),
    # ETIMEDOUT 60, ECONNREFUSED 61, EHOSTUNREACH 65: exo-explore/exo#2309 (a bridge0 address in the hostfile),
    # ml-explore/mlx#3755.
    Rule(r"\[(ring|jaccl)\] Couldn't connect",
         ("bridge", "no-ipv4", "peer-lost", "network", "hostfile"), "a rank could not reach its peer's address",
         "mlx/distributed/ring/ring.cpp make_connections, mlx/distributed/utils.cpp TCPSocket::connect; "
         "exo-explore/exo#2309, ml-explore/mlx#3755",
         "[ring] Couldn't connect (error: 60)"),
    # exo-explore/exo#1847: "[jaccl] Recv failed with errno=2" / "=60" mid-inference.
    Rule(r"\[jaccl\] (Recv|Send) failed with errno=?\s*\d+", ("peer-lost", "stale-rdma"),
         "a JACCL rank lost its peer mid-run", "mlx/distributed/utils.cpp TCPSocket::recv; exo-explore/exo#1847",
         "[jaccl] Recv failed with errno=2"),
    Rule(r"\[ring\] (connection to a peer was lost|Too many send/recv errors|(Receiving from|Sending to) socket)",
         ("peer-lost", "network"), "a ring rank lost its peer mid-run", "mlx/distributed/ring/ring.cpp SocketThread",
         "[ring] connection to a peer was lost"),
    # ml-explore/mlx#3830 (MLX_METAL_FAST_SYNCH wedges the GPU until a reboot), jundot/omlx#2029.
    # ml-explore/mlx#1231: "Internal Error (0000000e)" is a GPU kernel that timed out too (the maintainer's reading).
    Rule(r"Command buffer execution failed: (Caused GPU Timeout Error|Internal Error)|"
         r"kIOGPUCommandBufferCallbackErrorTimeout|SubmissionsIgnored", ("gpu-wedged",),
         "a Metal command buffer timed out on the GPU",
         "ml-explore/mlx#3830, ml-explore/mlx#1231, jundot/omlx#2029, exo-explore/exo#948",
         "[METAL] Command buffer execution failed: Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)"),
    # ssh's own words, and mlx.distributed_config's.
    Rule(r"ssh: connect to host \S+ port \d+: |ssh: Could not resolve hostname|Could not ssh to the following hosts|"
         r"Host key verification failed", ("network",), "the controller (or rank 0) cannot reach a Mac over ssh",
         "OpenSSH; mlx/_distributed_utils/config.py",
         "ssh: connect to host 10.0.0.12 port 22: Operation timed out"),
    # ml-explore/mlx#2944: mlx 0.30.1's distributed_config failed with this NameError (fixed later).
    Rule(r"NameError: name 'log_warning' is not defined|module 'mlx\.core\.distributed' has no attribute",
         ("mlx-version",), "this MLX version lacks or breaks what the command uses", "ml-explore/mlx#2944",
         "NameError: name 'log_warning' is not defined"),
    # exo-explore/exo#997: MLX before 0.30.1 has no JACCL.
    Rule(r"The only valid values for backend are .* but '[\w-]+' was provided", ("mlx-version", "launch-env"),
         "this MLX has no such distributed backend (JACCL needs MLX 0.30.1 or later)",
         "mlx/distributed/distributed.cpp; exo-explore/exo#997",
         "The only valid values for backend are 'any', 'mpi' and 'ring' but 'jaccl' was provided."),
    # ml-explore/mlx#4389 (MLX 0.30 on macOS 15: pin the MLX that works), ml-explore/mlx-examples#1296.
    Rule(r"\[metal::Device\] Unable to load kernel", ("mlx-version", "os-mismatch"),
         "this MLX's Metal kernels do not load on this Mac (an MLX built for a newer macOS, or mixed installs)",
         "mlx/backend/metal/device.cpp; ml-explore/mlx#4389, ml-explore/mlx-examples#1296",
         "RuntimeError: [metal::Device] Unable to load kernel v_copyint32float32"),
    # jjang-ai/mlxstudio#2: a Metal 4 library on macOS 15; macOS 26 fixed it.
    Rule(r"Failed to load the default metallib|This library is using language version [\d.]+ which is not supported "
         r"on this OS", ("os-mismatch", "mlx-version"), "the Mac's macOS is too old for this MLX's Metal library",
         "mlx/backend/metal/device.cpp; jjang-ai/mlxstudio#2", "RuntimeError: Failed to load the default metallib."),
    Rule(r"No module named '?mlx", ("launch-env", "mlx-version"), "the ranks' interpreter has no MLX",
         "CPython's ModuleNotFoundError",
         "ModuleNotFoundError: No module named 'mlx'"),
    # mlx.launch runs each rank through ssh and keeps ssh's own message to itself: exit status 255 is ssh's.
    Rule(r"Node with rank \d+ exited with code 255|returned non-zero exit status 255", ("network",),
         "ssh to a Mac failed (exit status 255 is ssh's own failure)",
         "mlx/_distributed_utils/launch.py RemoteProcess; ssh(1) EXIT STATUS",
         "[WARN] Node with rank 0 exited with code 255"),
    # MLX's MPI backend: Open MPI's TCP transport cannot reach a peer rank (ml-explore/mlx#2540, macOS).
    Rule(r"btl_tcp_endpoint\.c:\d+:mca_btl_tcp_endpoint_\w+\] .*(Unable to connect to the peer|connect\(\) to \S+ failed)",
         ("network", "hostfile", "no-ipv4"), "MLX's MPI backend (Open MPI's TCP transport) could not reach a peer rank",
         "Open MPI opal/mca/btl/tcp/btl_tcp_endpoint.c; ml-explore/mlx#2540",
         "[balthasar][[59259,1],0][btl_tcp_endpoint.c:857:mca_btl_tcp_endpoint_start_connect] peer: melchior Unable "
         "to connect to the peer 192.168.68.53 on port 1024: No route to host"),
    Rule(r"prterun has exited due to process rank \d+|prterun noticed that process rank \d+", ("peer-lost",),
         "Open MPI's launcher ended the job after a rank ended", "Open MPI prterun; ml-explore/mlx#2540",
         "prterun has exited due to process rank 0 with PID 0 on node balthasar calling", weight=1),
    # mlx/_distributed_utils/launch.py: the launcher's own account of each rank (a consequence, not a cause).
    Rule(r"Node with rank \d+ (was killed|exited with code)", ("peer-lost",), "a rank ended early",
         "mlx/_distributed_utils/launch.py",
         "[WARN] Node with rank 1 exited with code 1", weight=1),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Explanation:
    causes: list[str]  # most likely first; empty: unknown
    matched: list[tuple[str, Rule]] = field(default_factory=list)  # (the log line, its rule)
    confirmed: dict[str, list[str]] = field(default_factory=dict)  # cause -> what the Macs show now
    read: bool = False  # the Macs were read

    @property
    def first_line(self) -> str:
        return "cause: " + (" or ".join(self.causes[:2]) if self.causes else "unknown")


def match(text: str) -> list[tuple[str, Rule]]:
    """The log's lines that a rule knows, each with its rule (the first that matches), in log order."""
    found = []
    for line in _ANSI.sub("", text).splitlines():
        for rule in RULES:
            if rule.search(line):
                found.append((line.strip(), rule))
                break
    return found


def causes_of(text: str) -> list[str]:
    """The causes the strongest messages of TEXT can have, most likely first."""
    rules = [rule for line, rule in match(text)]
    strongest = max((rule.weight for rule in rules), default=0)
    ordered: list[str] = []
    for rule in rules:
        if rule.weight == strongest:
            ordered += [c for c in rule.causes if c not in ordered]
    return ordered


def explain(text: str, findings: dict | None = None) -> Explanation:
    """The causes of a log; FINDINGS (the watch's, by key), when the Macs were read, keep the causes they
    confirm."""
    result = Explanation(causes_of(text), match(text), read=findings is not None)
    if findings is None or not result.causes:
        return result
    for cause in result.causes:
        seen = lines(f for f in findings.values() if f.kind in CONFIRMED_BY.get(cause, ()))
        if seen:
            result.confirmed[cause] = seen
    if result.confirmed:
        result.causes = [c for c in result.causes if c in result.confirmed]
    return result


def fix(cause: str, inventory: str = "INVENTORY", output_dir: str = "OUTPUT_DIR", *, cli: bool = True) -> str:
    """The fix of CAUSE with its commands in the install's form (mlx-fleet's, with cli: explain and verify are
    commands of the CLI)."""
    return fixes.fill(FIX[cause], inventory, cli=cli).replace("OUTPUT_DIR", output_dir)


def report(result: Explanation, inventory: str = "INVENTORY", output_dir: str = "OUTPUT_DIR") -> list[str]:
    """The lines explain prints: the cause, what the log said, the evidence to collect, the fix."""

    def fill(text: str) -> str:
        return text.replace("INVENTORY", inventory).replace("OUTPUT_DIR", output_dir)

    lines = [result.first_line]
    if not result.causes:
        return lines + ["no message mlx-fleet knows is in this log; docs/troubleshooting.md lists the ones it "
                        "does; mlx-fleet watch -i INVENTORY --once shows what is wrong on the Macs now".replace(
                            "INVENTORY", inventory)]
    lines.append("")
    for line, rule in _distinct(result.matched):
        lines.append(f"the log says: {line}")
        lines.append(f"  {rule.says} (source: {rule.source})")
    if len(result.causes) > 2:
        lines.append(f"also possible: {', '.join(result.causes[2:])}")
    if len(result.causes) > 1 and not result.read:
        told = [f"{cause} if the watch finds {' or '.join(CONFIRMED_BY[cause])}" for cause in result.causes
                if cause in CONFIRMED_BY]
        if told:
            lines.append(f"-i {inventory} tells them apart: {'; '.join(told)}")
    if result.read and not result.confirmed:
        lines.append("the Macs show none of these now (read just now): the state may have changed since the log, "
                     "or the cause is on the Macs' side the probe does not see")
    for cause in result.causes:
        lines += ["", f"{cause}: {MEANING[cause]}"]
        if cause in result.confirmed:
            lines += ["  seen on the Macs now:"] + [f"    {m}" for m in result.confirmed[cause]]
        else:
            lines += ["  evidence to collect:"] + [f"    {fill(e)}" for e in EVIDENCE[cause]]
        lines.append(f"  fix: {fix(cause, inventory, output_dir)}")
    return lines


def _distinct(matched):
    seen, kept = set(), []
    for line, rule in matched:
        if rule.pattern not in seen:
            seen.add(rule.pattern)
            kept.append((line, rule))
    return kept
