"""How a run of the collection's playbooks is set up: the ansible.cfg and collection it uses, the
usual ansible-playbook flags, where the outputs go."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import OUTPUT_DIR_NAME

from mlx_fleet.errors import UserError

COLLECTION = "ansible_collections.mlx_fleet.cluster"
PACKAGED_CONFIG = Path(__file__).parent.parent / "ansible.cfg"
# The environment variables mlx-fleet sets for ansible-playbook that runs/<id>/command keeps, so that a
# person can rerun the command; no other variable of the controller's environment is ever written there.
RECORDED_ENV = ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_HOST_KEY_CHECKING")
# A Mac's own sudo password (onboarding's new Mac) reaches ansible-playbook as a host variable encrypted
# with a key made for the run, which ansible-playbook asks for on its terminal: nothing readable at rest.
VAULT_ID = "mlx_fleet_run"


def ansible_config() -> str:
    """The ansible.cfg a run uses: the user's ANSIBLE_CONFIG, else the one shipped in this package."""
    return os.environ.get("ANSIBLE_CONFIG") or str(PACKAGED_CONFIG)


def collections_path() -> str:
    """The folder that holds ansible_collections/mlx_fleet/cluster, as this Python imports it."""
    spec = importlib.util.find_spec(COLLECTION)
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the mlx_fleet.cluster collection is not importable: reinstall mlx-fleet")
    return str(Path(list(spec.submodule_search_locations)[0]).parent.parent.parent)


def default_output_dir(inventory: str) -> Path:
    """Where the playbooks put their outputs by default: OUTPUT_DIR_NAME beside the inventory."""
    path = Path(inventory).resolve()
    return (path if path.is_dir() else path.parent) / OUTPUT_DIR_NAME


@dataclass
class PlaybookOptions:
    """The usual ansible-playbook flags the CLI passes through."""

    extra_vars: list[str] = field(default_factory=list)
    limit: str | None = None
    check: bool = False
    diff: bool = False
    verbosity: int = 0
    read_only: bool = False  # a command that changes no Mac (audit, record)
    ask_become_pass: bool = False
    become_password: str | None = None  # -K's answer when already asked (onboard asks once for its runs)
    # Per Mac, a sudo password other than -K's (onboarding's new Mac: its admin password). Memory only.
    host_become_passwords: dict[str, str] = field(default_factory=dict)
    # Extra environment for ansible-playbook (os-update: the path of the socket its password comes from)
    environment: dict[str, str] = field(default_factory=dict)


def add_playbook_options(parser, inventory_required: bool = True, read_only: bool = False) -> None:
    """The flags every playbook-driven command takes, as ansible-playbook spells them (read-only
    commands take no --check or --diff: they change nothing anyway)."""
    parser.add_argument("-i", "--inventory", action="append", required=inventory_required,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--output-dir", help="where hostfiles, reports and run logs go "
                                             f"(default: {OUTPUT_DIR_NAME} in the inventory's folder)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="extra variables, as for ansible-playbook (key=value, JSON or @file)")
    parser.add_argument("-K", "--ask-become-pass", action="store_true", help="ask for the sudo password once")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more Ansible output in the run log")
    if not read_only:
        parser.add_argument("--check", action="store_true", help="change nothing; say what would change")
        parser.add_argument("--diff", action="store_true", help="show the differences of what changes")
    parser.add_argument("--limit", help="only these hosts (ansible --limit pattern), where the command allows it")


def options_from(args, command: str, needs_every_mac: bool) -> PlaybookOptions:
    if args.limit and needs_every_mac:
        raise UserError(f"--limit cannot apply to `mlx-fleet {command}`: it needs every Mac's facts "
                        "(the fabric is built from all of them); run it without --limit")
    return PlaybookOptions(extra_vars=args.extra_vars, limit=args.limit, check=getattr(args, "check", False),
                           diff=getattr(args, "diff", False),
                           verbosity=args.verbose, ask_become_pass=args.ask_become_pass,
                           read_only=not hasattr(args, "check"))


def output_dir_from(args) -> Path:
    return Path(args.output_dir).resolve() if args.output_dir else default_output_dir(args.inventory[0])


def output_extravars(args) -> dict:
    return {"mlx_fleet_output_dir": str(Path(args.output_dir).resolve())} if args.output_dir else {}
