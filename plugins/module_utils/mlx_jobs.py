# -*- coding: utf-8 -*-
"""The MLX jobs on a Mac, from one process listing: what os-update waits for, `mlx-fleet ps` lists and stops,
the watch and the check before a run judge.

A process is an MLX job's when it is an `mlx.launch` or runs from the cluster's environment (its first word
under the environment's folder). A job is such a process whose parent is none: it comes with every process
under it (its tree, what a stop ends) and their memory. Its launcher is the first ancestor above it that is no
plain shell (an sshd session, mlx.launch, a terminal, tmux); a job whose shells lead straight to pid 1 was
reparented to launchd: an orphan, whose launcher is gone.

Stdlib only, Python 3.9 compatible: os_update_facts runs it on the Mac; the controller's readers use it too.
"""

from __future__ import absolute_import, division, print_function

import os

__metaclass__ = type

# Not in macos_commands.READS (mlx-fleet capture): a process list is not the Mac's configuration, and it is private.
PS = ["ps", "-axo", "pid,ppid,etime,rss,command"]
LAUNCHD = 1
# What stands between a launcher and its job without being one: `ssh mac 'nohup python ... &'` runs under these.
_SHELLS = ("sh", "bash", "zsh", "dash", "nohup", "env", "setsid")


def _program(command):
    words = command.split()
    return os.path.basename(words[0]).lstrip("-") if words else ""


def is_job_process(command, env_path):
    """mlx.launch, a Python running it, or a program of the environment (a shell's `-c "mlx.launch ..."` is
    only its wrapper)."""
    words = command.split()
    if not words:
        return False
    folder = env_path.rstrip("/")
    program = os.path.basename(words[0])
    script = os.path.basename(words[1]) if len(words) > 1 and program.startswith("python") else ""
    return bool(folder) and words[0].startswith(folder + "/") or "mlx.launch" in (program, script)


def _launcher(process, by_pid):
    """The first ancestor that is no plain shell, and whether that is launchd (the job is an orphan). A parent
    missing from the listing (it ended while ps ran) gives (None, False): not known to be an orphan."""
    pid, seen = process["ppid"], set()
    while pid != LAUNCHD and pid in by_pid and pid not in seen and _program(by_pid[pid]["command"]) in _SHELLS:
        seen.add(pid)
        pid = by_pid[pid]["ppid"]
    if pid == LAUNCHD:
        return None, True
    return by_pid.get(pid), False


def _under_job(process, by_pid, env_path):
    """Whether an ancestor is a job's process (mlx.launch starts its ranks through a shell)."""
    pid, seen = process["ppid"], set()
    while pid in by_pid and pid not in seen:
        if is_job_process(by_pid[pid]["command"], env_path):
            return True
        seen.add(pid)
        pid = by_pid[pid]["ppid"]
    return False


def jobs(processes, env_path):
    """The MLX jobs among PROCESSES (macos_parsers.parse_ps): [{pid, command (at most 200 characters), age_seconds,
    rss_kib (its whole tree's), pids (its tree, the job first), launcher (its command; None when gone or not
    listed), orphan (reparented to launchd)}]."""
    by_pid = dict((p["pid"], p) for p in processes)
    children = {}
    for process in processes:
        children.setdefault(process["ppid"], []).append(process)
    found = []
    for process in processes:
        if not is_job_process(process["command"], env_path) or _under_job(process, by_pid, env_path):
            continue
        tree, todo = [], [process]
        while todo:
            member = todo.pop(0)
            if member["pid"] in tree or member["pid"] == LAUNCHD:
                continue
            tree.append(member["pid"])
            todo += children.get(member["pid"], [])
        launcher, orphan = _launcher(process, by_pid)
        found.append({"pid": process["pid"], "command": process["command"][:200], "age_seconds": process["age_seconds"],
                      "rss_kib": sum(by_pid[pid]["rss_kib"] for pid in tree), "pids": tree,
                      "launcher": launcher["command"][:200] if launcher else None, "orphan": orphan})
    return found
