"""mlx-fleet onboard: bring a Mac fresh from Setup Assistant into the cluster (docs/onboarding.md).

1. trust its host key (confirmed, then recorded); 2. install our key (and, if asked, passwordless
sudo) with the admin password, asked once; 3. read and check it and every Mac's ports
(playbooks/onboard.yml: the preflight rules, the cable advice, the visit sheet); 4. write it and the
advised cables into the inventory; 5. with --wait-for-cables, follow the Thunderbolt discovery until
the cables are in; 6. converge (site.yml over the whole cluster; the fabric keeps the addresses of
cables that did not change).
"""

from __future__ import annotations

import errno
import getpass
import os
import re
import shlex
import stat
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP as GROUP
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import OUTPUT_DIR_NAME
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import ssh_target
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import printable, terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet import inventory_edit, onboard_ssh, runner
from mlx_fleet.arguments import long_seconds
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK, Busy, UserError

DEFAULT_USER = "admin"
POLL_SECONDS = 2
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def print_plan(plan: dict) -> None:
    """The onboarding plan on the terminal: what the Mac reported with its control characters escaped,
    so one line stays one line (a serial number cannot forge the next line)."""
    shown = printable(plan)
    print(f"model: {shown['model'] or 'not in mlx-fleet catalogue'}, serial number {shown['serial_number']}")
    print(f"RDMA: {shown['rdma']}")
    for note in shown["notes"]:
        print(f"note: {note}")
    print(f"cables: {shown['headline']}")
    for number, step in enumerate(shown["steps"], 1):
        print(f"  {number}. {step}{' (plugged in already)' if step in shown['seen_steps'] else ''}")
    print(f"visit sheet: {shown['sheet']['html']} (text: {shown['sheet']['text']})")


def edit_inventory(inventories: list[str], edit, output_dir: Path) -> list:
    """inventory_edit.apply under the cluster's run lock, so two onboardings never interleave their
    read and write of the inventory (the second waits, then refuses: Busy, exit 3)."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder

    try:
        with runlock.run_lock(output_dir, "mlx-fleet onboard editing the inventory"):
            return inventory_edit.apply(inventories, edit)
    except runlock.LockBusy as exc:
        raise Busy(f"inventory not changed: {exc}") from None
    except UnsafeFolder as exc:
        raise UserError(str(exc)) from None


def add_onboard_parser(sub, command) -> None:
    parser = command(
        sub, "onboard", "bring a new Mac into the cluster: trust, access, checks, cables, inventory, converge",
        "Onboard a Mac fresh from Setup Assistant (an admin user with a password, Remote Login on): confirm "
        "its SSH host key, install your key with the admin password (asked once), read and check it, advise "
        "the Thunderbolt cables to add and print a visit sheet, add it and the cables to the inventory, "
        "optionally wait for the cables, then converge the cluster.",
        "  mlx-fleet onboard -i inventory/mine studio-4 --address 10.0.1.24 --location 'rack A, shelf 4'\n"
        "  mlx-fleet onboard -i inventory/mine studio-4 --address 10.0.1.24 --passwordless-sudo \\\n"
        "      --host-key-fingerprint SHA256:... --password-file ./pw --wait-for-cables")
    parser.add_argument("-i", "--inventory", action="append", required=True,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("name", help="the Mac's name in the inventory (studio-4)")
    parser.add_argument("--address", required=True, help="its address on the management network (IP or DNS name)")
    parser.add_argument("--model", choices=sorted(MODELS), help="its model (checked against the Mac; default: derived)")
    parser.add_argument("--location", help="where it stands (printed on the sheets)")
    parser.add_argument("--user", help="its admin user (default: the inventory's ansible_user, else admin)")
    parser.add_argument("--host-key-fingerprint", metavar="SHA256:...",
                        help="the Mac's SSH host key fingerprint, for scripts (else you are asked to confirm it)")
    parser.add_argument("--password-file", help="read the new Mac's admin password from this file, which only you may "
                                                "read (chmod 600; else it is asked once)")
    parser.add_argument("--passwordless-sudo", action="store_true",
                        help="also install a sudoers drop-in so the admin user needs no password for sudo")
    parser.add_argument("--known-hosts", help="known_hosts file to record the host key in (default: what ssh uses "
                                              "with the inventory's ssh arguments)")
    parser.add_argument("--identity", help="private key whose .pub to install (default: ssh's first key with a .pub)")
    parser.add_argument("--wait-for-cables", action="store_true",
                        help="after the advice, wait until the advised cables are plugged in, then converge")
    parser.add_argument("--cable-timeout", type=long_seconds, default=1800, metavar="SECONDS",
                        help="how long --wait-for-cables waits (default 1800)")
    parser.add_argument("--output-dir", help="where the visit sheet, hostfiles and run logs go "
                                             f"(default: {OUTPUT_DIR_NAME} in the inventory's folder)")
    parser.add_argument("-K", "--ask-become-pass", action="store_true",
                        help="ask once for the sudo password of the cluster's other Macs (the new Mac's sudo gets "
                             "its admin password, never theirs)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more Ansible output in the run log")


# --- the inventory, as Ansible reads it ---------------------------------------------------------


def _inventory_view(inventories: list[str], name: str) -> tuple[dict, dict | None]:
    """(the variables the new Mac gets from the group, its own entry if it has one)."""
    from mlx_fleet.inventory_view import (
        InventoryView, InventoryViewError)

    try:
        inventory = InventoryView(inventories)
        if not inventory.has_group(GROUP):
            raise UserError(f"the inventory has no group {GROUP}: list the cluster's Macs under it")
        variables = inventory.variables(name, group=GROUP)
        wanted = (ssh_target.USER, ssh_target.HOST, ssh_target.PORT, ssh_target.KEY_FILE,
                  *ssh_target.HOST_KEY_CHECKING, *ssh_target.ARGS)
        view = {key: str(inventory.template(variables[key], variables)) for key in wanted
                if variables.get(key) is not None}
    except InventoryViewError as exc:
        raise UserError(str(exc)) from None
    return view, inventory.own_vars(name)


def inventory_ssh_args(name: str, view: dict) -> list[str]:
    """ssh's arguments for the new Mac as the inventory reaches its Macs (plugin_utils.base.ssh_target: port, key,
    host-key checking, its ssh arguments), the user left out (onboarding gives it with -l)."""
    try:
        return list(replace(ssh_target.SshTarget.from_inventory(name, view.get), user=None).options)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _open_password_file(path: str) -> int:
    """The password file, open, if only this account can read it (checked on the open file: O_NOFOLLOW and fstat,
    so nothing can swap it between the check and the read); UserError in one line otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"--password-file {path} is a symbolic link: give the file itself (mode 600)") from None
        raise UserError(f"--password-file {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    mode = stat.S_IMODE(info.st_mode)
    problem = ("is not a regular file: give a file of your own, mode 600" if not stat.S_ISREG(info.st_mode)
               else f"belongs to another user (uid {info.st_uid}): use a file of your own, mode 600"
               if info.st_uid not in (os.getuid(), 0)
               else f"has mode {mode:04o}, so other accounts can read it: run `chmod 600 {shlex.quote(path)}`"
               if mode & 0o077 else None)
    if problem:
        os.close(fd)
        raise UserError(f"--password-file {path} {problem}")
    return fd


def check_password_file(path: str) -> None:
    """Refuse a password file another account can read or that another user owns, as ssh does for keys."""
    os.close(_open_password_file(path))


def _read_password(path: str | None, target: onboard_ssh.Target) -> str:
    return read_password(path, f"password of {target.user} on {target.name} ({target.hostname}): ", "the admin password")


def read_password(path: str | None, prompt: str, what: str) -> str:
    """A password from the first line of a file only this account can read (_open_password_file), else asked once
    without echo; never echoed or stored."""
    if path:
        with os.fdopen(_open_password_file(path), encoding="utf-8") as file:
            try:
                lines = file.read().splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"--password-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
        if not lines or not lines[0]:
            raise UserError(f"--password-file {path} is empty: its first line is {what}")
        return lines[0]
    if not sys.stdin.isatty():
        raise UserError(f"no terminal to ask {what} on: give --password-file FILE")
    return getpass.getpass(prompt)


def _trust(target: onboard_ssh.Target, given: str | None) -> tuple[str, bool]:
    """(the Mac's host key, whether known_hosts already has it). Never accepts an unknown key silently."""
    key = onboard_ssh.scan_host_key(target)
    fingerprint = onboard_ssh.fingerprint(key)
    known = onboard_ssh.known_keys(target)
    if given and given.strip() != fingerprint:
        raise UserError(f"{target.name}: the host key of {target.hostname} is {fingerprint}, not the "
                        f"{given.strip()} given; refused before any password was sent: check the fingerprint at "
                        "the Mac (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)")
    mine = f"{onboard_ssh.KEY_TYPE} {key}"
    if f"@revoked {mine}" in known:
        raise UserError(f"{target.name}: {target.known_hosts} marks the host key {fingerprint} of {target.hostname} "
                        "as revoked; refused before any password was sent")
    trusted = [k for k in known if not k.startswith("@")]
    if trusted and mine not in trusted:
        types = ", ".join(dict.fromkeys(k.split()[0] for k in trusted))
        raise UserError(f"{target.name}: {target.known_hosts} holds another host key for {target.hostname} ({types}); "
                        f"the Mac now shows {fingerprint}; if it was reinstalled, remove the old key with "
                        f"`ssh-keygen -R {target.hostname} -f {target.known_hosts}` and run again")
    if mine in trusted:
        print(f"host key: {fingerprint} (already in {target.known_hosts})")
        return key, True
    if not given:
        if not sys.stdin.isatty():
            raise UserError(f"{target.name}: cannot confirm the host key {fingerprint} without a terminal: give "
                            "--host-key-fingerprint after checking it at the Mac")
        print(f"{target.name} ({target.hostname}) shows the SSH host key {fingerprint}.\n"
              "Check it at the Mac: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")
        if input("Is that the Mac's key? Type yes to trust it: ").strip() != "yes":
            raise UserError(f"{target.name}: host key not confirmed; nothing was changed")
    print(f"host key: {fingerprint} (confirmed)")
    return key, False


def _access(target: onboard_ssh.Target, key: str, known: bool, args) -> str | None:
    """Install our key (and passwordless sudo); the admin password when it was needed (or sudo on the Mac
    still asks for it, as after an interrupted onboarding), else None."""
    check = "sudo -n true" if args.passwordless_sudo else "true"
    if known and onboard_ssh.key_login_works(target, check):
        if args.passwordless_sudo or onboard_ssh.key_login_works(target, "sudo -n true"):
            print(f"access: key login as {target.user} works with passwordless sudo")
            return None
        print(f"access: key login as {target.user} works; its sudo asks for the admin password")
        return _read_password(args.password_file, target)
    password = _read_password(args.password_file, target)
    access = onboard_ssh.install_access(target, key, password, passwordless_sudo=args.passwordless_sudo)
    if not known:
        onboard_ssh.record_host_key(target, key)
    sudo = f"; sudoers drop-in {onboard_ssh.dropin_path(target.user)} {access.sudoers}" if access.sudoers else ""
    print(f"access: {target.identity}.pub {access.key} in ~{target.user}/.ssh/authorized_keys{sudo}; "
          f"host key recorded in {target.known_hosts}")
    return password


# --- the steps after the preflight ----------------------------------------------------------------


def _new_host_file(folder: Path, name: str, host_vars: dict) -> Path:
    """A one-host inventory that adds the Mac to the group for the preflight run only."""
    path = folder / "onboarding.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {GROUP: {"hosts": {name: host_vars or None}}}}}))
    return path


def wait_for_cables(inventories: list[str], advised: list[str], output_dir: Path, timeout: float,
                    extravars: dict, stream=sys.stdout) -> bool:
    """Read the cabling until every advised cable is in, saying what is seen; a cable in a wrong
    port gets the fabric's line with the move that fixes it. False after the timeout. The advised cables
    are the onboarding plan's ``add``, named as the fabric names the cables it finds (lower end first)."""
    wanted = list(advised)
    started = time.monotonic()
    said: set[str] = set()
    last = None
    live = stream.isatty()
    while True:
        report = runner.run_playbook("cables", inventories, runner.PlaybookOptions(), extravars=extravars,
                                     output_dir=output_dir, progress=False)
        fabric = report.result("mlx_fleet.cluster.fabric") or {}
        found = set(fabric.get("cables", {}))  # the fabric names each cable lower end first
        seen = [c for c in wanted if c in found]
        elapsed = time.monotonic() - started
        for finding in fabric.get("findings", []):
            if finding["kind"] in ("wrong-port", "extra") and finding["message"] not in said and (
                    finding["cable"] in wanted or finding["kind"] == "extra"):
                said.add(finding["message"])
                stream.write(("\r\033[K" if live else "") + terminal_text([finding["message"]]) + "\n")
        for host, message in report.unreachable.items():
            if message not in said:
                said.add(message)
                stream.write(("\r\033[K" if live else "") + terminal_text([f"unreachable: {host}: {message}"]) + "\n")
        waiting = [c for c in wanted if c not in found]
        line = (f"cables: {len(seen)}/{len(wanted)} in"
                + (f"; waiting for {', '.join(waiting)}" if waiting else ""))
        if live:
            stream.write(f"\r\033[K{line} ({elapsed:.0f} s)"[:200] + ("\n" if not waiting else ""))
        elif line != last:
            stream.write(line + "\n")
        stream.flush()
        last = line
        if not waiting:
            return True
        if elapsed > timeout:
            if live:
                stream.write("\n")
            return False
        time.sleep(POLL_SECONDS)


def run_onboard(args) -> int:
    """The whole onboarding, ending with its converge's summary and exit status."""
    started = time.monotonic()
    onboard_ssh.which_ssh()
    if args.password_file:
        check_password_file(args.password_file)
    name = args.name
    if not _NAME_RE.match(name):
        raise UserError(f"{name!r} is not a usable inventory name: letters, digits, '-', '_' and '.'")
    view, own = _inventory_view(args.inventory, name)
    if own is not None and own.get("ansible_host", args.address) != args.address:
        raise UserError(f"{name} is already in the inventory with ansible_host {own['ansible_host']}, not "
                        f"{args.address}: give that address or another name")
    user = args.user or view.get("ansible_user") or DEFAULT_USER
    ssh_args = inventory_ssh_args(name, view)
    target = onboard_ssh.resolve(name, args.address, user, ssh_args, known_hosts=args.known_hosts,
                                 identity=args.identity)

    key, known = _trust(target, args.host_key_fingerprint)
    password = _access(target, key, known, args)
    # -K is the other Macs' sudo password, asked once for every run below.
    others = getpass.getpass("sudo password of the cluster's other Macs: ") if args.ask_become_pass else None

    def host_vars(model: str | None) -> dict:
        # In the order an inventory usually has them: address, user, model, location.
        wanted = {"ansible_host": args.address if target.needs_ansible_host else None,
                  "ansible_user": user if view.get("ansible_user") != user else None,
                  "mlx_fleet_model": model, "mlx_fleet_location": args.location}
        return {var: value for var, value in wanted.items() if value}

    output_dir = runner.output_dir_from(args)
    inventory_text = " ".join(f"-i {shlex.quote(i)}" for i in args.inventory)
    converge = fixes.run_command("site", args.inventory, cli=True)
    extravars = {"mlx_fleet_output_dir": str(output_dir)}
    # Sudo on the new Mac asks for its admin password unless the drop-in went in: that Mac's alone.
    options = runner.PlaybookOptions(verbosity=args.verbose, become_password=others, host_become_passwords=(
        {name: password} if password and not args.passwordless_sudo else {}))
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-onboard-") as folder:
        inventories = list(args.inventory)
        if own is None:
            inventories.append(str(_new_host_file(Path(folder), name, host_vars(args.model))))
        report = runner.run_playbook("onboard", inventories, options, output_dir=output_dir, extravars=dict(
            extravars, mlx_fleet_onboard_host=name, mlx_fleet_onboard_inventory=" ".join(args.inventory),
            mlx_fleet_onboard_afterwards=[f"mlx-fleet onboard {inventory_text} {shlex.quote(name)} --address "
                                          f"{shlex.quote(args.address)} --wait-for-cables"]))
    plan = report.result("mlx_fleet.cluster.onboard_plan")
    if report.exit_status != EXIT_OK or not plan or plan.get("failed"):
        return runner.print_summary(report)
    print_plan(plan)

    edit = inventory_edit.Edit(name, host_vars(plan["model"]), plan["add"], plan["unplug"])
    try:
        changed = edit_inventory(args.inventory, edit, output_dir)
    except inventory_edit.NotEditable as exc:
        print(f"inventory: not changed: {exc}; add these lines yourself, then run `{converge}`:")
        print(inventory_edit.lines_to_add(edit))
        return EXIT_ATTENTION
    updated = ", ".join(f"{p} (before: {backup.name})" for p, backup in changed.items())
    print(f"inventory: {'updated ' + updated if changed else 'already lists ' + name + ' and its cables'}")

    pending = [c for c in plan["add"] if c not in plan["seen"]]
    if pending or plan["unplug"]:
        if not args.wait_for_cables:
            print(f"next: do what the visit sheet says, then run this command again with --wait-for-cables "
                  f"(or `{converge}` once the cables are in)")
            return EXIT_ATTENTION
        sys.stdout.flush()  # the advice goes out before the wait, even into a pipe
        if not wait_for_cables(args.inventory, plan["add"], output_dir, args.cable_timeout, extravars):
            print(f"cables: not all in after {args.cable_timeout:.0f} s; plug them as the visit sheet says and "
                  "run this command again")
            return EXIT_ATTENTION
    report = runner.run_playbook("site", args.inventory, options, output_dir=output_dir, extravars=extravars)
    status = runner.print_converge_summary(report)
    print(f"onboarding of {name} took {time.monotonic() - started:.0f} s")
    return status
