"""Output folders a user names (capture --out, verify --out): one another account owns, or can write, is refused
before anything is written, since links it plants there would be written through (the tests run as root)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from mlx_fleet import capture as cap
from mlx_fleet.cli import main
from mlx_fleet.errors import EXIT_BAD_INPUT
from mlx_fleet.verify import cli as verify_cli

OTHER_UID = 502  # another account (the sim's student)

# An ssh whose first call is the other account planting links in the capture folder, every link to the victim.
PLANTING_SSH = textwrap.dedent("""\
    #!{python}
    import os, sys
    out = {out!r}
    for name in ("manifest.json", *{files!r}):
        if not os.path.lexists(os.path.join(out, name)):
            os.symlink({victim!r}, os.path.join(out, name))
    sys.stdout.write("planted\\n")
    """)


def _theirs(path: Path, mode: int = 0o755) -> Path:
    path.mkdir()
    os.chown(path, OTHER_UID, OTHER_UID)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o755, 0o777])
def test_capture_into_an_empty_folder_another_account_owns_is_refused_and_nothing_is_written(tmp_path, mode):
    out, victim = _theirs(tmp_path / "cap", mode), tmp_path / "victim"
    victim.write_text("root's file\n")
    ssh = tmp_path / "ssh"
    ssh.write_text(PLANTING_SSH.format(python=sys.executable, out=str(out), victim=str(victim),
                                       files=[cap.capture_name(n) for n in cap.reads()]))
    ssh.chmod(0o755)
    with pytest.raises(cap.CaptureError, match=f"uid {OTHER_UID}|mode {mode:04o}"):
        cap.capture("mac-1", out, ssh=str(ssh))
    assert victim.read_text() == "root's file\n" and list(out.iterdir()) == []


def test_capture_makes_a_missing_folder_private(tmp_path):
    ssh = tmp_path / "ssh"
    ssh.write_text("#!/bin/sh\necho out\n")
    ssh.chmod(0o755)
    out = tmp_path / "new" / "cap"
    cap.capture("mac-1", out, ssh=str(ssh))
    assert (out.stat().st_uid, out.stat().st_mode & 0o7777) == (os.geteuid(), 0o700)


def test_verify_into_a_folder_another_account_owns_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    out = _theirs(tmp_path / "report")
    (tmp_path / "victim").write_text("root's file\n")
    (out / "verify.json").symlink_to(tmp_path / "victim")  # planted while the folder was theirs

    def ran(*_args):
        raise AssertionError("verify ran into a folder another account owns")

    monkeypatch.setattr(verify_cli, "settings_from_inventory",
                        lambda _inventory: SimpleNamespace(python="python3", bridge=None, output_dir=tmp_path))
    monkeypatch.setattr(verify_cli, "load_cluster", lambda *_args: SimpleNamespace(backend="ring", hosts=[], cables=[]))
    monkeypatch.setattr(verify_cli, "mlx_launch", lambda: "mlx.launch")
    monkeypatch.setattr(verify_cli, "verify", ran)
    status = main(["verify", "-i", str(tmp_path / "inventory.yml"), "--out", str(out)])
    err = capsys.readouterr().err
    assert status == EXIT_BAD_INPUT and err.count("\n") == 1 and str(out) in err and f"uid {OTHER_UID}" in err
    assert (tmp_path / "victim").read_text() == "root's file\n" and [p.name for p in out.iterdir()] == ["verify.json"]
