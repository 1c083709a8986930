"""The controller's output folder, published a whole set at a time.

The hostfiles, the cluster model, the RDMA ledger, the checklist and the pictures of a folder
live in a generation, ``.generations/<number>/``; ``.current`` links to the published one, and each
file's name in the folder (``hostfile.json``) links through ``.current``. A writer stages a new
generation (a copy of the current files, with its own written over them) and publishes it by
replacing ``.current`` with one rename: a reader sees the files of one generation, never a
hostfile from one write beside a cluster model from another, and a writer that fails or is
killed half-way publishes nothing. Writers hold the run lock (plugin_utils.storage.runlock).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import private_folder, sync_folder

GENERATIONS = ".generations"
CURRENT = ".current"
KEPT = 2  # the published generation and the one before it (a reader may still be opening it)


def _replace_link(link: Path, target: str) -> None:
    """Point link at target in one rename (a reader never finds the name missing)."""
    temp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    os.symlink(target, temp)
    os.replace(temp, link)


def current_files(directory: Path) -> dict[str, Path]:
    """The published files, name -> path: those of the current generation whose name in the folder still
    links to it. A generation owns only its own files: a report written in the folder later (audit.json,
    a visit sheet, a file of the user's) replaced the link with a file of its own, which stays as written;
    the plain files of a folder written before generations are not taken in either."""
    generation = directory / CURRENT
    if not generation.is_dir():
        return {}
    return {p.name: p for p in generation.iterdir() if p.is_file() and (directory / p.name).is_symlink()
            and os.readlink(directory / p.name) == f"{CURRENT}/{p.name}"}


@contextmanager
def staged(directory: str | Path) -> Iterator[Path]:
    """A private folder holding the current files, to write the new ones into (replace a file by
    writing a new one over its name, or unlink it). When the block ends normally, the folder becomes
    the published set; when it raises, nothing is published."""
    directory = private_folder(directory)
    generations = private_folder(directory / GENERATIONS, follow=False)  # what it rmtrees is its own
    before = current_files(directory)
    stage = Path(tempfile.mkdtemp(prefix=".staged-", dir=generations))
    try:
        # Copies, not hard links: a writer may write a file in place without touching the published one.
        for name, path in before.items():
            shutil.copy2(path, stage / name)
        yield stage
        after = {p.name: p for p in stage.iterdir() if p.is_file()}
        unchanged = after.keys() == before.keys() and all(
            after[n].read_bytes() == before[n].read_bytes() for n in after)
        if unchanged and (directory / CURRENT).is_dir():
            return
        for path in after.values():
            path.chmod(0o644)
        stage.chmod(0o755)
        sync_folder(stage)
        numbers = [int(p.name) for p in generations.iterdir() if p.name.isdigit()]
        published = generations / f"{max(numbers, default=0) + 1:010d}"
        os.rename(stage, published)
        _replace_link(directory / CURRENT, f"{GENERATIONS}/{published.name}")
        for name in after:
            link = directory / name
            if not (link.is_symlink() and os.readlink(link) == f"{CURRENT}/{name}"):
                _replace_link(link, f"{CURRENT}/{name}")
        for name in before.keys() - after.keys():
            (directory / name).unlink(missing_ok=True)
        sync_folder(directory)
        # Older generations, and stages a killed writer left behind (writers hold the run lock).
        for old in sorted(p for p in generations.iterdir() if p.name.isdigit())[:-KEPT] + [
                p for p in generations.iterdir() if p.name.startswith(".staged-")]:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # gone already once published
