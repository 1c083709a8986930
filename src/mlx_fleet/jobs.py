"""The MLX jobs on the Macs (docs/jobs-ps-stop.md): read over ssh, judged, stopped.

The read is one ssh session per Mac, all at once (verify.nodes.probe): `ps -axo pid,ppid,etime,rss,command`
parsed and grouped into jobs by module_utils.mlx_jobs, the code os_update_facts runs on the Mac. The watch and
the check before a run add the same read to their own probe (READ, jobs_in). A stop is one more session per Mac:
TERM to every process of the jobs' trees, KILL after a grace to what is left, then the listing again, which
says what is still there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_jobs import PS, jobs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget
from mlx_fleet.verify import nodes

READ = {"ps": PS}  # a section of a probe's script (verify.nodes.read_script's commands)
GRACE = 10  # seconds between TERM and KILL
_POLL = 0.2


@dataclass
class MacJobs:
    """What one Mac said: its jobs (module_utils.mlx_jobs.jobs), or why it could not say."""

    host: str
    reachable: bool = True
    error: str = ""  # unreachable, or the listing not read
    jobs: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def jobs_in(host: str, reads: dict[str, tuple[int, str]], env_path: str) -> MacJobs:
    """The jobs in a probe's reads (the section READ added)."""
    rc, text = reads.get("ps", (None, ""))
    if rc != 0:
        return MacJobs(host, error=f"ps: {'no output' if rc is None else f'exit status {rc}'}")
    warnings: list[str] = []
    try:
        processes = parsers.parse_ps(text, warnings)
    except ValueError as exc:
        return MacJobs(host, error=str(exc))
    return MacJobs(host, jobs=jobs(processes, env_path), warnings=warnings)


def read(targets: list[SshTarget], env_path: str, connect_timeout: float = nodes.CONNECT_TIMEOUT) -> dict[str, MacJobs]:
    """Every Mac's jobs, one ssh session each, all at once; host -> MacJobs."""
    found = nodes.probe(targets, nodes.read_script((), None, commands=READ), connect_timeout)
    return {host: jobs_in(host, node.reads, env_path) if node.reachable
            else MacJobs(host, reachable=False, error=node.error) for host, node in found.items()}


def stop_script(pids: list[int], grace: float = GRACE) -> str:
    """TERM to PIDS, up to GRACE seconds for them to end, KILL to what is left, then the listing (section READ)."""
    listed = " ".join(str(int(pid)) for pid in pids)
    ticks = max(1, round(grace / _POLL))
    alive = f'a=""; for p in {listed}; do kill -0 "$p" 2>/dev/null && a="$a $p"; done'
    return (f"kill -TERM {listed} 2>/dev/null; i=0; {alive}; "
            f'while [ -n "$a" ] && [ $i -lt {ticks} ]; do sleep {_POLL}; i=$((i+1)); {alive}; done; '
            f'[ -z "$a" ] || kill -KILL $a 2>/dev/null; sleep {_POLL}; '
            + nodes.read_script((), None, commands=READ))


@dataclass
class Stopped:
    host: str
    stopped: list[dict] = field(default_factory=list)  # the jobs asked to stop that are gone
    left: list[dict] = field(default_factory=list)  # still there afterwards (or not known: the Mac did not answer)
    error: str = ""


def stop(targets: list[SshTarget], chosen: dict[str, list[dict]], env_path: str, grace: float = GRACE,
         connect_timeout: float = nodes.CONNECT_TIMEOUT) -> dict[str, Stopped]:
    """Stop the CHOSEN jobs (host -> jobs as read), their whole trees, one ssh session per Mac, all at once;
    the listing afterwards says which are gone. Bounded: the grace, then KILL, then at most SSH_TIMEOUT."""
    by_name = {target.name: target for target in targets if chosen.get(target.name)}

    def work(host: str) -> Stopped:
        pids = [pid for job in chosen[host] for pid in job["pids"]]
        result = nodes.ssh(by_name[host], stop_script(pids, grace), timeout=grace + nodes.SSH_TIMEOUT,
                           connect_timeout=connect_timeout)
        after = jobs_in(host, nodes._sections(result.stdout.decode("utf-8", "replace")), env_path)
        if result.returncode == 255 or after.error:
            why = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [after.error]
            return Stopped(host, left=list(chosen[host]), error=why[0])
        still = {pid for job in after.jobs for pid in job["pids"]}
        return Stopped(host, [job for job in chosen[host] if not still & set(job["pids"])],
                       [job for job in chosen[host] if still & set(job["pids"])])

    return nodes.each(list(by_name), work)


# --- judgements ------------------------------------------------------------------------------------------


def size(kib: int) -> str:
    for unit, factor in (("GiB", 1 << 20), ("MiB", 1 << 10)):
        if kib >= factor:
            return f"{kib / factor:.1f} {unit}"
    return f"{kib} KiB"


def age(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}d{hours:02d}h" if days else f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def job_id(host: str, job: dict) -> str:
    """How `mlx-fleet ps` names a job and `mlx-fleet stop` takes it: MAC:PID."""
    return f"{host}:{job['pid']}"


def _described(job: dict) -> str:
    return f"pid {job['pid']}, {size(job['rss_kib'])}, up {age(job['age_seconds'])}: {job['command'][:80]}"


# Fix templates ({inventory}: base.fixes.fill).
STOP_ORPHANS = "mlx-fleet stop -i {inventory} --orphans"
STOP_JOB = "mlx-fleet stop -i {inventory} "


def orphan_ranks(host: str, mac_jobs: list[dict]) -> list[Finding]:
    """The jobs on HOST whose launcher is gone (reparented to launchd), holding memory: one finding for the Mac
    (the watch names a finding by its kind and Mac)."""
    orphans = [job for job in mac_jobs if job["orphan"]]
    return [Finding("orphan-rank", (host,), "; ".join(map(_described, orphans)), fix=STOP_ORPHANS)] if orphans else []


def running(host: str, mac_jobs: list[dict]) -> list[Finding]:
    """Any MLX job on HOST (another one would share its memory and its RDMA ports): one finding each."""
    return [Finding("job-running", (host,), _described(job), fix=STOP_JOB + job_id(host, job)) for job in mac_jobs]
