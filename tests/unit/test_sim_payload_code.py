"""The simulated Macs' cache of Ansible's compiled module payloads (src/mlx_fleet/sim/doubles/macsim_payload_code.py),
run by the interpreter the nodes run, /usr/bin/python3, on zips named as AnsiballZ names them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mlx_fleet.sim import doubles

pytestmark = pytest.mark.skipif(not Path("/usr/bin/python3").exists() or sys.platform != "linux",
                                reason="the simulator's nodes run the machine's /usr/bin/python3")
HOOK = Path(doubles.__file__).parent / "macsim_payload_code.py"
MODULE = "def fail():\n    raise RuntimeError('from the payload')\n\nANSWER = 42\n"
# Imports the hook as the node's .pth does, then the payload's module; prints its answer and where its traceback
# says the failing function is.
RUN = """
import sys, traceback
sys.path.insert(0, sys.argv[1])
import macsim_payload_code
sys.path.insert(0, sys.argv[2])
import payload_mod
print(payload_mod.ANSWER)
try:
    payload_mod.fail()
except RuntimeError:
    print(traceback.extract_tb(sys.exc_info()[2])[-1].filename)
"""


def payload(folder: Path, source: str = MODULE) -> Path:
    """A fresh zip as AnsiballZ makes one for each run: its own temporary folder, ansible_MODULE_payload.zip."""
    folder.mkdir()
    path = folder / "ansible_ping_payload.zip"
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr("payload_mod.py", source)
    return path


def run(tmp_path: Path, zipped: Path) -> list[str]:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    found = subprocess.run(["/usr/bin/python3", "-c", RUN, str(HOOK.parent), str(zipped)], capture_output=True,
                           text=True, env=env, check=True)
    assert found.stderr == ""
    return found.stdout.split()


def cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / f"macsim-payload-code-{os.getuid()}").glob("*"))



def test_a_module_compiled_once_is_loaded_by_the_next_run_with_its_own_zip_in_tracebacks(tmp_path):
    first = payload(tmp_path / "run-1")
    assert run(tmp_path, first) == ["42", f"{first}/payload_mod.py"]
    kept = cached(tmp_path)
    assert len(kept) == 1
    stamp = kept[0].stat().st_mtime_ns

    second = payload(tmp_path / "run-2")
    assert run(tmp_path, second) == ["42", f"{second}/payload_mod.py"]  # the cached code, placed in this run's zip
    assert cached(tmp_path) == kept and kept[0].stat().st_mtime_ns == stamp  # loaded, not compiled again


def test_another_source_is_compiled_and_kept_apart(tmp_path):
    run(tmp_path, payload(tmp_path / "run-1"))
    assert run(tmp_path, payload(tmp_path / "run-2", MODULE.replace("42", "43")))[0] == "43"
    assert len(cached(tmp_path)) == 2


def test_a_folder_another_user_could_write_is_not_used(tmp_path):
    folder = tmp_path / f"macsim-payload-code-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # as if made by someone else for this user
    assert run(tmp_path, payload(tmp_path / "run-1"))[0] == "42"
    assert list(folder.iterdir()) == []


def test_a_zip_that_is_no_module_payload_is_left_to_python(tmp_path):
    other = tmp_path / "libs"
    other.mkdir()
    with zipfile.ZipFile(other / "vendor.zip", "w") as zipped:
        zipped.writestr("payload_mod.py", MODULE)
    assert run(tmp_path, other / "vendor.zip")[0] == "42"
    assert cached(tmp_path) == []
