"""The controller's files (hostfiles, cluster model, pictures, checklist, RDMA ledger), written atomically."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterator

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text


class UnsafeFolder(ValueError):
    """An output folder another account could write into: one line naming the problem and the fix."""


def private_folder(path: str | Path, *, follow: bool = True) -> Path:
    """path as a folder only this user can change: made 0700 when missing (missing parents as mkdir -p
    makes them); one already there must be a folder owned by this user (or root) that group and others
    cannot write, else UnsafeFolder. follow=False refuses a symlink too (the folders inside the output
    folder, which mlx-fleet alone makes); the output folder itself may be a link the user made."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    st = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolder(f"{path} is a symlink, where mlx-fleet keeps a folder of its own: remove it and run again")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"{path} is not a folder: move it away or choose another output folder")
    if st.st_uid not in (os.geteuid(), 0):
        raise UnsafeFolder(f"{path} belongs to another user (uid {st.st_uid}), who could change the hostfiles and "
                           "ledgers mlx-fleet reads there: use a folder of your own (--output-dir, or "
                           "mlx_fleet_output_dir)")
    if st.st_mode & 0o022:
        raise UnsafeFolder(f"{path} can be written by {'group and others' if st.st_mode & 0o002 else 'its group'} "
                           f"(mode {stat.S_IMODE(st.st_mode):04o}), who could change the hostfiles and ledgers "
                           f"mlx-fleet reads there: run chmod go-w {path}")
    return path


def sync_folder(folder: Path) -> None:
    """Make a rename in folder durable: without it, a power cut can bring back the old entry."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path: str | Path, mode: int = 0o644,
              check: Callable[[Path], None] | None = None) -> Iterator[BinaryIO]:
    """The one atomic write of the controller: a binary handle on a temporary file beside path; when the block
    ends normally it is synced, check (raising) sees it on the disk, it is given mode, renamed over path and
    the folder synced, so a reader, or the disk after a power cut, sees the old file or the complete new one,
    never a part. When the block or check raises, path is left as it was."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if check:
            check(Path(temp))
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def atomic_write_text(path: str | Path, text: str, check: Callable[[str], None] | None = None,
                      mode: int = 0o644) -> bool:
    """Replace path with text (replacing), unless it holds exactly that already; True when it was written.
    check (raising) sees the text as read back from the disk before the rename."""
    path = Path(path)
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass  # missing or unreadable: write it
    with replacing(path, mode, check and (lambda temp: check(temp.read_text()))) as handle:
        handle.write(text.encode())
    return True


def atomic_write_json(path: str | Path, data, validate: Callable[[object], None] | None = None, *,
                      final_newline: bool = True) -> bool:
    """Write data as JSON (json_text) to path atomically (atomic_write_text); validate (raising
    ValueError) sees what was read back. True when it was written."""
    path = Path(path)

    def check(text: str) -> None:
        back = json.loads(text)
        if back != data:
            raise ValueError(f"{path}: the written file does not read back as the data")
        if validate:
            validate(back)

    return atomic_write_text(path, json_text(data, final_newline), check)


def load_json(text: str | bytes):
    """json.loads, with JSON nested deeper than Python can follow reported as malformed JSON (ValueError) like
    any other, rather than as a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
