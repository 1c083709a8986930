"""Run the collection's playbooks for the CLI, through ansible-runner.

The CLI works from a clone (or an editable install): the Ansible content is the
repository root this package sits in (src/mlx_fleet -> root), with its ansible.cfg.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

CONTENT = Path(__file__).resolve().parents[2]


def run_playbook(playbook: str, inventories: list[str], extravars: dict | None = None,
                 limit: str | None = None, check: bool = False) -> int:
    """Run playbooks/<playbook> against the inventories; returns ansible-playbook's exit status."""
    import ansible_runner

    path = CONTENT / "playbooks" / playbook
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run mlx-fleet from a clone of the project")
    # ansible-runner starts ansible-playbook by name: the one installed beside this Python.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    cmdline = ["--check"] if check else []
    private = tempfile.mkdtemp(prefix="mlx-fleet-run-")
    try:
        result = ansible_runner.run(
            private_data_dir=private,
            playbook=str(path),
            inventory=[str(Path(i).resolve()) for i in inventories],
            extravars=extravars or {},
            limit=limit,
            cmdline=" ".join(cmdline) or None,
            envvars={"ANSIBLE_CONFIG": str(CONTENT / "ansible.cfg")},
            project_dir=str(CONTENT),
        )
        return result.rc
    finally:
        shutil.rmtree(private, ignore_errors=True)


def add_playbook_parser(sub, name: str, help_text: str):
    parser = sub.add_parser(name, help=help_text)
    parser.add_argument("-i", "--inventory", action="append", required=True,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--output-dir", help="where hostfiles, pictures and the checklist go "
                                             "(default: .mlx-fleet in the inventory's folder)")
    parser.add_argument("--limit", help="only these hosts (ansible --limit pattern)")
    return parser


def run_from_args(playbook: str, args) -> int:
    extravars = {"mlx_fleet_output_dir": str(Path(args.output_dir).resolve())} if args.output_dir else {}
    return run_playbook(playbook, args.inventory, extravars, limit=args.limit)
