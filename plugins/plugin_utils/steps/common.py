"""What every controller step shares, apart from Ansible: how it runs (the outputs' folder, check mode, the run
lock, the fixes' form), the warnings it finds for a person, and how it fails (StepFailed, which the action
plugins turn into Ansible's failure, marking bad input)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.runlock import LockBusy, run_lock


class StepFailed(Exception):
    """A step that cannot go on: its lines, whether they are bad input (nothing changed, the inventory is what
    to fix), and its result so far."""

    def __init__(self, lines: list[str], *, bad_input: bool = False, result: dict | None = None):
        super().__init__("\n".join(lines))
        self.lines, self.bad_input, self.result = lines, bad_input, result


@dataclass
class Run:
    """How the step runs: where the outputs are, whether it may write (not in check mode), who holds the run
    lock meanwhile, and how the fixes it names are run."""

    output_dir: Path
    write: bool
    holder: str
    inventory: str = "INVENTORY"
    cli: bool = False
    shown: list[str] = field(default_factory=list)  # warnings for a person, as the step finds them


def locked(run: Run, step, refused: str | None = None):
    """STEP() with the run lock held while it reads the previous outputs and writes the new ones; REFUSED: what
    the step's failure says stays as it was when the lock or the folder is not to be had (None: only why)."""
    if not run.write:
        return step()
    try:
        with run_lock(run.output_dir, run.holder):
            return step()
    except (LockBusy, UnsafeFolder) as exc:
        raise StepFailed([f"{refused}: {exc}" if refused else str(exc)]) from None
