"""Helpers to build simulated clusters with the real `mlx-fleet sim` command."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent
MLX_FLEET = str(BIN / "mlx-fleet")


def mlx_fleet(*args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
    result = subprocess.run([MLX_FLEET, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"mlx-fleet {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


class Sim:
    """One simulated cluster in its own world-readable folder."""

    def __init__(self, **up_args):
        # Not under pytest's 0700 tmp: the simulated Macs' admin user reads files from here.
        self.dir = Path(tempfile.mkdtemp(prefix="mlx-fleet-sim-", dir="/var/tmp"))
        self.dir.chmod(0o755)
        argv = ["sim", "up", "--dir", str(self.dir)]
        for key, value in up_args.items():
            for item in value if isinstance(value, (list, tuple)) else [value]:  # a list repeats the option
                argv += [f"--{key.replace('_', '-')}", str(item)]
        mlx_fleet(*argv)
        self.inventory = yaml.safe_load((self.dir / "inventory.yml").read_text())
        self.nodes = list(self.inventory["all"]["children"]["mlx_cluster"]["hosts"])

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        sub, *rest = args
        return mlx_fleet("sim", sub, "--dir", str(self.dir), *rest, check=check)

    def ssh(self, node: str, command: str, check: bool = True, own_config: bool = False) -> subprocess.CompletedProcess:
        """Plain `ssh NODE`, as MLX's tools call it (through the ssh_config drop-in); `own_config`
        reads this cluster's ssh_config only, whatever other clusters answer to the same name."""
        config = ["-F", str(self.dir / "ssh_config")] if own_config else []
        result = subprocess.run(["ssh", *config, "-o", "BatchMode=yes", node, command], capture_output=True, text=True,
                                timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"ssh {node} {command!r} exited {result.returncode}: {result.stderr}")
        return result

    def own_ssh_env(self) -> dict:
        """os.environ with a plain `ssh` first on PATH that reads this cluster's ssh_config only, for tools
        such as mlx.launch that call `ssh NODE`: other clusters on the machine may have the same node names."""
        folder = self.dir / "own-ssh"
        if not folder.exists():
            folder.mkdir()
            wrapper = folder / "ssh"
            wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('ssh')} -F {self.dir / 'ssh_config'} \"$@\"\n")
            wrapper.chmod(0o755)
        return dict(os.environ, PATH=f"{folder}:{os.environ['PATH']}")

    def profile(self, node: str) -> dict:
        """The node's simulated hardware (node.json)."""
        return json.loads((self.dir / "nodes" / node / "fs/usr/local/libexec/macsim/node.json").read_text())

    def device(self, node: str, receptacle: int) -> str:
        """The enX a node's Thunderbolt port N is, from the simulated hardware."""
        return next(p["device"] for p in self.profile(node)["thunderbolt"] if p["receptacle"] == receptacle)

    def state(self) -> dict:
        return json.loads((self.dir / "state.json").read_text())

    def down(self) -> None:
        if (self.dir / "state.json").exists():
            self.cli("down")
        shutil.rmtree(self.dir, ignore_errors=True)


NODE_PYTHON = Path("/var/tmp/mlx-fleet-node-python")
REPO = Path(__file__).resolve().parents[2]


def node_python() -> tuple[str, str]:
    """A Python with MLX at one path every simulated Mac can run, and the all_sum example beside it.

    Made from the nodes' own /usr/bin/python3, outside the sim's private folders, so that
    mlx.launch finds the same interpreter on every node (until the mlx_env role installs one).
    """
    python = NODE_PYTHON / "venv/bin/python"
    if not python.exists():
        NODE_PYTHON.mkdir(mode=0o755, parents=True, exist_ok=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(NODE_PYTHON / "venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "mlx[cpu]==0.32.4"],
                       check=True)
    script = NODE_PYTHON / "all_sum.py"
    shutil.copyfile(REPO / "examples" / "all_sum.py", script)
    script.chmod(0o644)
    return str(python), str(script)


def cable_networks(folder: Path) -> dict[str, str]:
    """Each cable's /30 ("a:1 -- b:2" -> network) by the cluster model the last converge wrote in folder."""
    return {link["cable"]: link["network"] for link in json.loads((folder / "cluster.json").read_text())["links"]}


# --- shared by the sim test modules (no test module imports another) -------------------------------------

# What a run could change on a Mac, read through the Mac's own tools. Not ls's "total" lines: they count the
# blocks the files occupy, which the file system changes by itself after a write (a large file written by
# the last run, e.g. the store's uv, may get an extent block when its data is written back, ~30 s later).
STATE = ("ls -laR /opt /Library/LaunchDaemons /Library/Preferences/SystemConfiguration | grep -v '^total '; "
         "pmset -g custom; scutil --get ComputerName; networksetup -listnetworkserviceorder; ifconfig; "
         "sysctl iogpu.wired_limit_mb")
ENV_CACHE = "/var/tmp/mlx-fleet-env-cache"  # the warm download cache the env tests share
HOSTFILES = ("hostfile.json", "hostfile-ring.json", "cluster.json")


def digests(out: Path) -> dict[str, str]:
    """The published hostfiles and cluster model of an output folder, by content."""
    return {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in HOSTFILES}



def logins(sim: Sim) -> int:
    """SSH logins the simulated Macs have accepted so far (their sshd logs)."""
    return sum((sim.dir / "nodes" / n / "console.log").read_text().count("Accepted publickey") for n in sim.nodes)



def listing(sim: Sim) -> dict[str, str]:
    """What a run could change on each Mac (STATE, and every file of /Library by content), read through the
    Mac's own tools at its console: not a plain ssh, which another cluster's Mac of that name may answer."""
    command = STATE + "; find /Library -type f -exec shasum -a 256 {} + | sort"
    return {node: sim.cli("exec", node, "--", "sh", "-c", command).stdout for node in sim.nodes}



def command_lines(environment: bool = False) -> list[str]:
    """Every process's command line on this machine (the simulated Macs' too: they share its process table), with
    its environment after it if `environment`: what `ps -e -ww -o args` (with `e`) shows, read from /proc as ps
    does, at a fifth of ps's CPU (a watch takes it every few tenths of a second while a run goes on)."""
    parts = ("cmdline", "environ") if environment else ("cmdline",)
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.append(" ".join(Path(f"/proc/{pid}/{part}").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace").strip() for part in parts))
            except OSError:  # it ended meanwhile
                pass
    return found


class Ps:
    """The arguments of every process (with ENVIRONMENT their environment too: what `ps` shows), taken every 0.2 s
    while a run goes on."""

    def __init__(self, environment: bool = True):
        self.seen: list[str] = []
        self.environments = (False, True) if environment else (False,)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self.stop.wait(0.2):
            for environment in self.environments:
                self.seen.append("\n".join(command_lines(environment)))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def mlx_fleet_packaged(*argv: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """mlx-fleet with the config it ships (no ANSIBLE_CONFIG), as a user runs it; prefix: e.g. `ip netns exec NS`."""
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}  # the packaged config
    return subprocess.run([*prefix, MLX_FLEET, *argv], capture_output=True, text=True, env=env, timeout=600, cwd="/",
                          stdin=subprocess.DEVNULL)


def converge(inventory: Path, *extra: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return mlx_fleet_packaged("converge", "-i", str(inventory), "-e", f"mlx_env_cache_dir={ENV_CACHE}", *extra, prefix=prefix)


def lines(result: subprocess.CompletedProcess, *starts: str) -> list[str]:
    """The output lines that start with one of starts."""
    return [line for line in result.stdout.splitlines() if line.startswith(starts)]


def plan_file(path: Path, nodes: dict[str, str], cables: list[str]) -> str:
    """A `sim up --topology` plan file: these nodes and models, these cables."""
    path.write_text(yaml.safe_dump({"nodes": {n: {"model": m} for n, m in nodes.items()}, "cables": cables}))
    return str(path)


# --- what a playbook run did, from its JSON, never from the recap text ------------------------------------

CALLBACKS = Path(__file__).resolve().parent / "callbacks"


def run_recorded(argv: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run of an ansible-playbook command with the test-only record_json callback on (beside the
    callbacks the run has, e.g. the summary): result.recorded is what it wrote (plays, tasks, per-host stats)."""
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-record-") as folder:
        record = Path(folder) / "record.json"
        enabled = [name for name in env.get("ANSIBLE_CALLBACKS_ENABLED", "mlx_fleet.cluster.summary").split(",") if name]
        env = env | {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "MLX_FLEET_RECORD": str(record),
                     "ANSIBLE_CALLBACKS_ENABLED": ",".join([*enabled, "record_json"])}
        result = subprocess.run(argv, capture_output=True, text=True, env=env, **kwargs)
        result.recorded = json.loads(record.read_text()) if record.exists() else None
    return result


def run_folder(result: subprocess.CompletedProcess) -> Path:
    """A mlx-fleet command's ansible-runner artifacts, from its summary's `full output: FOLDER/stdout (N s)` line."""
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("full output: ")]
    return Path(line.split()[2]).parent


def runner_events(result: subprocess.CompletedProcess, name: str) -> list[dict]:
    """The event_data of a mlx-fleet command's ansible-runner events of this name (runner_on_ok, ...), in order."""
    events = [json.loads(path.read_text()) for path in (run_folder(result) / "job_events").glob("*.json")]
    return [event["event_data"] for event in sorted(events, key=lambda event: event.get("counter", 0))
            if event.get("event") == name]


# ansible-runner's playbook_on_stats names -> the names of ansible's own per-host summary (record_json's).
_RUNNER_STATS = {"ok": "ok", "changed": "changed", "unreachable": "dark", "failures": "failures",
                 "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}


def host_stats(result: subprocess.CompletedProcess) -> dict[str, dict[str, int]]:
    """Per host, what the playbook run did (ok, changed, unreachable, failures, skipped, rescued, ignored): from
    record_json (run_recorded), or for a mlx-fleet command from ansible-runner's job events of its run."""
    if getattr(result, "recorded", None) is not None:
        return result.recorded["stats"]
    if hasattr(result, "recorded"):
        raise AssertionError(f"the run recorded nothing:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    (stats,) = runner_events(result, "playbook_on_stats")
    return {host: {name: stats.get(key, {}).get(host, 0) for name, key in _RUNNER_STATS.items()}
            for host in stats["processed"]}


def changed_per_host(result: subprocess.CompletedProcess) -> dict[str, int]:
    """Per host, how many tasks the run changed."""
    return {host: counts["changed"] for host, counts in host_stats(result).items()}


def task_results(recorded: dict, name_part: str) -> dict[str, dict]:
    """Per host, the result of the first task whose name has name_part, in what record_json wrote."""
    for play in recorded["plays"]:
        for task in play["tasks"]:
            if name_part in task["task"]["name"]:
                return task["hosts"]
    raise AssertionError(f"no task {name_part!r}")


# --- models sync (issue 28): a cluster with declared models, its runs read from their JSON events ----------

def make_model(folder: Path, shards: dict[str, int]) -> int:
    """Random shards, a config and a tokenizer in FOLDER; their bytes in all."""
    folder.mkdir(parents=True)
    for name, size in shards.items():
        with open(folder / name, "wb") as out:
            for start in range(0, size, 64 << 20):  # a GiB-sized shard without a GiB in memory
                out.write(os.urandom(min(64 << 20, size - start)))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (folder / "tokenizer.json").write_text(json.dumps({"vocab": {f"t{i}": i for i in range(2000)}}))
    return sum(p.stat().st_size for p in folder.iterdir())


class ModelsCluster:
    """SIM with a Hub stand-in serving SIM.dir/repos (HUB_ARGS: its faults), a models' lock of its own, and the
    cables' addresses in the cluster model (`mlx-fleet hostfile`): ready for `models sync`."""

    def __init__(self, sim: Sim, controller_cache: Path, *hub_args: str):
        self.sim, self.macs = sim, sim.nodes
        self.serve(controller_cache, *hub_args)
        self.inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
        env_lock = sim.dir / "mlx-env.lock.json"  # the models' lock goes beside it, in this cluster's folder
        shutil.copyfile(self.cluster_vars["mlx_env_lock_file"], env_lock)
        self.cluster_vars["mlx_env_lock_file"] = str(env_lock)
        self.declare([])
        result, _ = self.run("hostfile")
        assert result.returncode == 0, result.stdout + result.stderr

    @classmethod
    def prepared(cls, sim: Sim, controller_cache: Path, *hub_args: str) -> ModelsCluster:
        """SIM as a ModelsCluster left it (e.g. restored from a snapshot taken then): only the Hub stand-in started."""
        cluster = cls.__new__(cls)
        cluster.sim, cluster.macs = sim, sim.nodes
        cluster.serve(controller_cache, *hub_args)
        cluster.inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
        return cluster

    def serve(self, controller_cache: Path, *hub_args: str) -> None:
        """The Hub stand-in serving SIM.dir/repos with HUB_ARGS (its faults); self.env reaches it."""
        (self.sim.dir / "repos").mkdir(exist_ok=True)
        served = self.sim.cli("hub", "serve", str(self.sim.dir / "repos"), *hub_args).stdout
        endpoint = next(line.split("=", 1)[1] for line in served.splitlines() if line.startswith("HF_ENDPOINT="))
        self.env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
        self.env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(controller_cache), HF_HUB_DISABLE_TELEMETRY="1")

    @property
    def cluster_vars(self) -> dict:
        return self.inventory["all"]["children"]["mlx_cluster"]["vars"]

    def declare(self, models: list[dict]) -> None:
        """mlx_fleet_models: MODELS."""
        self.cluster_vars["mlx_fleet_models"] = models
        (self.sim.dir / "inventory.yml").write_text(yaml.safe_dump(self.inventory, sort_keys=False))

    def argv(self, *args: str) -> list[str]:
        return [MLX_FLEET, *args, "-i", str(self.sim.dir / "inventory.yml")]

    def runs(self) -> set[Path]:
        folder = self.sim.dir / ".mlx-fleet" / "runs"
        return set(folder.glob("*")) if folder.is_dir() else set()

    def results(self, before: set[Path]) -> dict[str, dict]:
        """The results of the newest run since BEFORE, by action and host (runner_on_ok and runner_on_failed)."""
        runs = sorted(self.runs() - before)
        found: dict[str, dict] = {}
        for path in (runs[-1] / "job_events").glob("*.json") if runs else ():
            event = json.loads(path.read_text())
            if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
                data = event["event_data"]
                found.setdefault(data["task_action"], {})[data["host"]] = data["res"]
        return found

    def run(self, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
        """`mlx-fleet ARGS -i INVENTORY`: the process, and its run's results by action and host."""
        before = self.runs()
        result = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=900, env=env or self.env)
        assert "Traceback" not in result.stderr + result.stdout, result.stderr
        return result, self.results(before)

    def held(self, mac: str, name: str) -> Path:
        return self.sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "models" / name

    def hub_cache(self, mac: str) -> Path:
        return self.sim.dir / "nodes" / mac / "fs" / "opt" / "mlx-fleet" / "huggingface" / "hub"

    def management_bytes(self) -> int:
        """Bytes every Mac's management interface (en0, its veth to the controller's bridge) received so far."""
        state = self.sim.state()
        total = 0
        for name in state["nodes"]:
            out = subprocess.run(["ip", "-n", f"mfs{state['index']}-{name}", "-j", "-s", "link", "show", "en0"],
                                 capture_output=True, text=True, check=True).stdout
            total += json.loads(out)[0]["stats64"]["rx"]["bytes"]
        return total

    def still_listening(self) -> list[str]:
        """The Macs where anything still listens on the sync's port: none once a sync has returned."""
        state = self.sim.state()
        return [name for name in state["nodes"]
                if subprocess.run(["ip", "netns", "exec", f"mfs{state['index']}-{name}", "ss", "-Hltn",
                                   "sport = :47181"], capture_output=True, text=True, check=True).stdout.strip()]

    def wait_nothing_listens(self) -> list[str]:
        """still_listening once the bounds of silence had their time (30 s, 120 s before a first receiver)."""
        for _ in range(180):
            if not self.still_listening():
                break
            time.sleep(1)
        return self.still_listening()


def sync_report(found: dict) -> dict:
    """The models_sync_report's report of a run's results (ModelsCluster.run)."""
    (report,) = [res["report"] for res in found["mlx_fleet.cluster.models_sync_report"].values()]
    return report


def sync_plan(found: dict) -> dict:
    (plan,) = [res["plan"] for res in found["mlx_fleet.cluster.models_sync_plan"].values() if "plan" in res]
    return plan


def received(found: dict) -> dict[str, list[str]]:
    """Per Mac the files its model_copy received (model/path)."""
    copies = found.get("mlx_fleet.cluster.model_copy", {})
    return {mac: sorted(f"{f['model']}/{f['path']}" for f in res["ansible_facts"]["mlx_fleet_model_copy"]["received"])
            for mac, res in copies.items()
            if res.get("ansible_facts", {}).get("mlx_fleet_model_copy", {}).get("received")}


def planned(found: dict) -> dict[str, list[str]]:
    """Per Mac the files the run's plan gave it to receive (model/path)."""
    return {mac: sorted(f"{f['model']}/{f['path']}" for r in p["receive"] for f in r["files"])
            for mac, p in sync_plan(found)["macs"].items() if p["files"]}


def plan(path: Path, names: list[str], cables: list[str]) -> str:
    """A cable plan of Mac minis (`sim up --topology PATH`): NAMES, joined by CABLES ("a:1 -- b:2")."""
    path.write_text(yaml.safe_dump({"nodes": {n: {"model": "mini-m4-pro"} for n in names}, "cables": cables}))
    return str(path)


def run_tool(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """A tool of the controller with the repository's ansible.cfg, no terminal, no stdin."""
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd="/",
                          stdin=subprocess.DEVNULL)


def converged(sim: Sim) -> Sim:
    """The fabric configured: the Thunderbolt addresses on the Macs, the hostfiles in DIR/.mlx-fleet."""
    done = run_tool([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"),
                     str(REPO / "playbooks/fabric.yml")], 300)
    assert done.returncode == 0, done.stdout
    return sim
