"""Host-side plumbing for macsim: commands, the cluster registry and shared host resources.

Several simulated clusters can be up at once (one per --dir). Each gets an index
K from a registry under /run, which keeps their namespace and interface names
(`mfs<K>...`) and management subnets (10.213.K.0/24) apart. Resources shared by
all clusters on the machine (the `admin` user and the /Users and /Library
mount points) are created by the first cluster and removed with the last.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import grp
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

REGISTRY = Path("/run/mlx-fleet-sim")
# While a cluster is up, a drop-in here includes its DIR/ssh_config, so a plain `ssh NODE` reaches it.
DROP_IN_DIR = Path("/etc/ssh/ssh_config.d")
DROP_IN_GLOB = "mlx-fleet-sim-*.conf"
ADMIN_USER = "admin"
ADMIN_UID = 501  # the first account on every Mac
ADMIN_HOME_ROOT = "/Users"
# A second, standard account, as a shared lab Mac has: no sudo, no Remote Login, a home of its own;
# what it can reach (/tmp, guessable paths) is what the toolkit must not trust.
OTHER_USER = "student"
OTHER_UID = 502
# Directories a Mac has that a Debian host lacks; nodes mount their own copies there.
MAC_ONLY_DIRS = ("/Users", "/Library")
# Groups a Mac has that a Debian host lacks, with the Mac's gid: files a playbook installs as
# root:wheel (LaunchDaemons) need the name; gid 0 makes it an alias of Debian's root group.
MAC_ONLY_GROUPS = {"wheel": 0}
MAX_CLUSTERS = 250


class SimError(RuntimeError):
    """A failure to report to the user as one clear message."""


def run(argv: list[str], *, check: bool = True, capture: bool = True, input: str | None = None):
    result = subprocess.run(argv, text=True, capture_output=capture, input=input)
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout or "").strip()
        raise SimError(f"{' '.join(argv)} failed ({result.returncode}): {detail}")
    return result


def require_host_tools() -> None:
    if os.geteuid() != 0:
        raise SimError("macsim needs root (network and mount namespaces); run it with sudo")
    missing = [t for t in ("ip", "nsenter", "unshare", "ssh-keygen", "sudo", "zsh") if not shutil.which(t)]
    missing += [p for p in ("/usr/sbin/sshd", "/usr/bin/python3") if not os.path.exists(p)]
    if missing:
        raise SimError(
            f"missing on this machine: {', '.join(missing)}; install with: "
            "apt-get install -y openssh-server openssh-client iproute2 sudo zsh python3 util-linux"
        )


@contextlib.contextmanager
def registry_lock():
    REGISTRY.mkdir(mode=0o700, exist_ok=True)
    with open(REGISTRY / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _entries() -> dict[int, dict]:
    out = {}
    for path in REGISTRY.glob("cluster-*.json"):
        with contextlib.suppress(ValueError, OSError):
            out[int(path.stem.split("-")[1])] = json.loads(path.read_text())
    return out


def claim_index(sim_dir: Path) -> int:
    """The cluster index for sim_dir, claiming a free one if it has none (call under the lock)."""
    entries = _entries()
    for index, entry in entries.items():
        if entry.get("dir") == str(sim_dir):
            return index
    for index in range(1, MAX_CLUSTERS + 1):
        if index not in entries:
            (REGISTRY / f"cluster-{index}.json").write_text(json.dumps({"dir": str(sim_dir)}))
            return index
    raise SimError(f"{MAX_CLUSTERS} simulated clusters are up already; take one down first")


def release_index(index: int) -> None:
    (REGISTRY / f"cluster-{index}.json").unlink(missing_ok=True)


def clusters_up() -> int:
    return len(_entries())


def _shared_state() -> dict:
    path = REGISTRY / "shared.json"
    return json.loads(path.read_text()) if path.exists() else {}


def acquire_shared_resources() -> str:
    """Make the admin user and Mac-only mount points exist; returns the admin password."""
    state = _shared_state()
    if not state:
        state = {"created_dirs": [], "created_user": False, "password": secrets.token_urlsafe(18)}
        for d in MAC_ONLY_DIRS:
            if not os.path.exists(d):
                os.mkdir(d, 0o755)
                state["created_dirs"].append(d)
        try:
            pwd.getpwnam(ADMIN_USER)
        except KeyError:
            uid = ADMIN_UID if not _uid_taken(ADMIN_UID) else None
            # Primary group staff, as on a Mac; membership of `admin` is per node (see Cluster).
            argv = ["useradd", "--no-create-home", "--home-dir", f"{ADMIN_HOME_ROOT}/{ADMIN_USER}",
                    "--gid", "staff", "--shell", shutil.which("zsh"), "--comment", "macsim admin"]
            run(argv + (["--uid", str(uid)] if uid else []) + [ADMIN_USER])
            state["created_user"] = True
        else:
            if pwd.getpwnam(ADMIN_USER).pw_dir != f"{ADMIN_HOME_ROOT}/{ADMIN_USER}":
                raise SimError(f"a host user {ADMIN_USER!r} exists already with another home; macsim needs that name")
        # A real password, so `sudo` with a password (--ask-become-pass) can be rehearsed.
        run(["chpasswd"], input=f"{ADMIN_USER}:{state['password']}\n")
    # Outside the first-cluster block: clusters made before a group or account joined the list get it too.
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        argv = ["useradd", "--no-create-home", "--home-dir", f"{ADMIN_HOME_ROOT}/{OTHER_USER}", "--gid", "staff",
                "--shell", shutil.which("zsh"), "--comment", "macsim standard account"]
        run(argv + (["--uid", str(OTHER_UID)] if not _uid_taken(OTHER_UID) else []) + [OTHER_USER])
        state.setdefault("created_users", []).append(OTHER_USER)
    for name, gid in MAC_ONLY_GROUPS.items():
        try:
            grp.getgrnam(name)
        except KeyError:
            run(["groupadd", "--non-unique", "--gid", str(gid), name])
            state.setdefault("created_groups", []).append(name)
    path = REGISTRY / "shared.json"
    path.write_text(json.dumps(state))
    path.chmod(0o600)
    return state["password"]


def _uid_taken(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def release_shared_resources() -> None:
    """Remove what acquire_shared_resources made once no cluster is left (call under the lock)."""
    if clusters_up():
        return
    state = _shared_state()
    if state.get("created_user"):
        run(["userdel", ADMIN_USER], check=False)
    for name in state.get("created_users", []):
        run(["userdel", name], check=False)
    for name in state.get("created_groups", []):
        run(["groupdel", "--force", name], check=False)  # --force: gid 0 is root's primary group
    for d in state.get("created_dirs", []):
        with contextlib.suppress(OSError):
            os.rmdir(d)
    (REGISTRY / "shared.json").unlink(missing_ok=True)


# What a cluster folder's path may hold: ssh_config splits an argument at whitespace and reads quotes, globs
# (Include), %-tokens, ${VAR} and ~ in the paths the sim writes there (Include, IdentityFile, UserKnownHostsFile).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._+,=@-]+")
_MAX_LINKS = 40  # as the kernel's ELOOP


def check_cluster_dir(sim_dir: Path) -> None:
    """Refuse a cluster folder another account could change or swap: ssh on this machine reads its ssh_config
    (for every user, through the drop-in) and every simulated Mac trusts its key. sim_dir as given (absolute, not
    resolved): each folder and symlink on the way is checked as the kernel walks it. A folder not there yet
    passes: `up` makes it (make_cluster_dir)."""
    resolved = os.path.realpath(sim_dir)
    if not _PLAIN_PATH.fullmatch(resolved):
        raise SimError(f"cluster folder {resolved}: ssh_config would read its spaces, quotes or wildcards as "
                       "syntax; give a path of letters, digits and / . _ - + , = @ only")
    problem = _path_problem(sim_dir)
    if problem:
        raise SimError(f"cluster folder {sim_dir}: {problem}")


def make_cluster_dir(sim_dir: Path) -> None:
    """Make the cluster folder and its missing parents, root's and 0755, each by a mkdir of our own (no exist_ok):
    one that appears meanwhile was made by someone else and is refused; then the whole way is checked again."""
    missing, folder = [], sim_dir
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            raise SimError(f"cluster folder {sim_dir}: {folder} appeared while sim up ran (owner uid "
                           f"{os.lstat(folder).st_uid}), made by someone else; remove it or give a new folder") from None
        os.chmod(folder, 0o755)  # whatever the umask
    problem = _path_problem(sim_dir)
    if problem:
        raise SimError(f"cluster folder {sim_dir}: {problem}")


def _path_problem(path: Path) -> str | None:
    """Why an account other than root could swap path, or a folder or symlink on the way to it (links followed
    one step at a time, as the kernel does); None when none could, the part not made yet included."""
    here, todo, links = Path("/"), list(Path(path).parts[1:]), 0
    problem = _folder_problem(here, os.lstat(here), last=not todo)
    while todo and not problem:
        part = todo.pop(0)
        if part == "..":
            here = here.parent
            continue
        step = here / part
        try:
            st = os.lstat(step)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if st.st_uid != 0:
                return (f"{step} is a symlink made by uid {st.st_uid}, who could point it at any folder root writes to; "
                        "give a folder made by root (sudo mkdir)")
            if links > _MAX_LINKS:
                return f"{step}: too many levels of symlinks"
            target = Path(os.readlink(step))
            here = Path("/") if target.is_absolute() else here
            todo[:0] = target.parts[1:] if target.is_absolute() else target.parts
            continue
        problem = _folder_problem(step, st, last=not todo)
        here = step
    return problem


def _folder_problem(folder: Path, st: os.stat_result, last: bool) -> str | None:
    """Why another account could change folder (a parent on the way, or the cluster folder when last): a
    world-writable parent is fine when sticky (/tmp), as the next step, root's, cannot be renamed by others."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != 0:
        return (f"{folder} is owned by uid {st.st_uid}, not root, who could swap what sim up writes there (its "
                "ssh_config goes into every ssh on this machine); use a folder root made with root's parents (e.g. /tmp/lab)")
    if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
        return (f"{folder} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}), who could swap what sim up "
                f"writes there (its ssh_config goes into every ssh on this machine); run: sudo chmod go-w {folder}")
    return None


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    """Write path as root without following a symlink there: a new file beside it (O_EXCL), renamed over
    the name (a rename replaces a link, it never writes through it)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def drop_in_target(drop_in: Path) -> str | None:
    """The ssh_config a drop-in includes (`Include DIR/ssh_config`)."""
    with contextlib.suppress(OSError):
        for line in drop_in.read_text().splitlines():
            if line.startswith("Include "):
                return line.split(" ", 1)[1]
    return None


def remove_stale_drop_ins() -> list[Path]:
    """Remove the drop-ins of clusters that are not up: a host reboot empties the registry
    (under /run) and stops every node, but the drop-ins in /etc stay behind."""
    removed = []
    with registry_lock():
        running = {(index, str(Path(entry.get("dir", "")) / "ssh_config")) for index, entry in _entries().items()}
        for drop_in in DROP_IN_DIR.glob(DROP_IN_GLOB):
            index = drop_in.stem.rsplit("-", 1)[-1]
            if not index.isdigit() or (int(index), drop_in_target(drop_in)) not in running:
                drop_in.unlink(missing_ok=True)
                removed.append(drop_in)
    return removed


def user_ssh_configs() -> list[Path]:
    """The ssh configs a plain `ssh NODE` reads besides the sim's own drop-ins."""
    homes = {Path.home()}
    if os.environ.get("SUDO_USER"):
        with contextlib.suppress(KeyError):
            homes.add(Path(pwd.getpwnam(os.environ["SUDO_USER"]).pw_dir))
    drop_ins = sorted(p for p in DROP_IN_DIR.glob("*.conf") if not p.match(DROP_IN_GLOB))
    return [home / ".ssh" / "config" for home in sorted(homes)] + [Path("/etc/ssh/ssh_config")] + drop_ins


def _host_patterns(config: Path, name: str) -> list[str]:
    """The `Host` patterns of an ssh config that match `name` (negations honoured; `Host *` left out)."""
    found = []
    with contextlib.suppress(OSError):
        for line in config.read_text(errors="replace").splitlines():
            keyword, _, rest = line.strip().replace("=", " ", 1).partition(" ")
            if keyword.lower() != "host":
                continue
            patterns = rest.split()
            if any(fnmatch.fnmatchcase(name, p[1:]) for p in patterns if p.startswith("!")):
                continue
            found += [p for p in patterns if p != "*" and not p.startswith("!") and fnmatch.fnmatchcase(name, p)]
    return found


def name_warnings(names, ssh_configs: list[Path] | None = None, timeout: float = 3.0) -> list[str]:
    """Node names this machine already resolves (hosts file or DNS) or that another ssh config
    entry matches: programs other than ssh, or ssh itself, may reach something else by that name."""
    warnings = []
    lookups = {name: subprocess.Popen(["getent", "hosts", name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True) for name in names}
    deadline = time.monotonic() + timeout  # a resolver that does not answer must not hold up the sim
    for name, lookup in lookups.items():
        try:
            found = lookup.communicate(timeout=max(0.0, deadline - time.monotonic()))[0].split()
        except subprocess.TimeoutExpired:
            lookup.kill()
            lookup.wait()
            continue
        if lookup.returncode == 0 and found:
            warnings.append(f"{name} already resolves to {found[0]} on this machine (getent hosts {name}); "
                            "ssh reaches the simulated Mac, other programs may reach that address")
    for config in user_ssh_configs() if ssh_configs is None else ssh_configs:
        for name in names:
            patterns = _host_patterns(config, name)
            if patterns:
                warnings.append(f"{name} matches 'Host {' '.join(patterns)}' in {config}: "
                                "that entry may change how ssh reaches the simulated Mac")
    return warnings


def admin_ids(user: str = ADMIN_USER) -> tuple[int, int]:
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
