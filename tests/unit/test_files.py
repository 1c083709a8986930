"""The one atomic write per side (plugin_utils.storage.files.replacing, module_utils.files.write_atomically) and the one
JSON style (module_utils.files.json_text)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import files as mac_files
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import files


class Module:
    def fail_json(self, msg, **kwargs):
        raise AssertionError(msg)


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with files.replacing(path) as handle:
            handle.write(b"half")
            raise RuntimeError("killed")

    def refuse(data):
        raise ValueError("not a cluster model")

    with pytest.raises(ValueError):
        files.atomic_write_json(path, {"a": 1}, validate=refuse)
    assert path.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["cluster.json"]


def test_a_written_file_gets_its_mode_and_is_written_only_when_it_differs(tmp_path):
    path = tmp_path / "command"
    assert files.atomic_write_text(path, "x\n", mode=0o600) is True
    assert files.atomic_write_text(path, "x\n", mode=0o600) is False
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_both_sides_write_json_in_one_style(tmp_path):
    data = {"version": 1, "b": [1, {"z": None}], "a": "x"}
    files.atomic_write_json(tmp_path / "controller.json", data)
    mac_files.write_json(Module(), str(tmp_path / "mac" / "record.json"), data)
    controller, mac = ((tmp_path / name).read_text() for name in ("controller.json", "mac/record.json"))
    assert controller == mac == json.dumps(data, indent=4) + "\n"
    assert os.stat(tmp_path / "mac" / "record.json").st_mode & 0o777 == 0o644
