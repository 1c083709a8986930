"""`ansible-test sanity` on the collection's plugins (every plugin folder), meta and galaxy.yml.

ansible-test must run from a path .../ansible_collections/mlx_fleet/cluster, so the collection's
plugins, meta and tests/sanity (its ignore file) are copied into one, and all of it is tested.
Each sanity test that needs Python packages runs in a virtual environment ansible-test makes; it
fetches pip's bootstrap script from its own server, which this machine cannot reach, so a stand-in
(ensurepip, then the pinned pip from the package index) is put where ansible-test caches that
script. The packages come from the package index like any pip install. Those environments are
kept in ~/.cache/mlx-fleet/ansible-test between runs (about a minute once they exist).

Not run: shellcheck and pslint (no shell or PowerShell among these targets, and neither
program is installed).

The import test loads the plugins that are not modules or module_utils (action, plugin_utils)
with ansible-core and only its jinja2 and PyYAML, a list a collection cannot add to (ansible-test
reads no requirements file of a collection for it): plugin_utils imports packaging guarded, as
ansible-core's own plugins do.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_TEST = Path(sys.executable).parent / "ansible-test"
PYTHON = "{0}.{1}".format(*sys.version_info[:2])
COPIED = ("galaxy.yml", "meta", "plugins", "tests/sanity")
SKIPPED = ("shellcheck", "pslint")
# The tests that check what this collection's plugins are made of; each must have run.
EXPECTED = {"ansible-doc", "compile", "import", "pep8", "pylint", "validate-modules", "yamllint", "ignores",
            "no-assert", "shebang", "use-argspec-type-path", "action-plugin-docs", "runtime-metadata",
            "replace-urlopen"}
CACHE_HOME = Path.home() / ".cache" / "mlx-fleet" / "ansible-test"
GET_PIP_STAND_IN = '''"""Stand-in for get-pip.py (written by tests/sim/test_sanity.py): ensurepip, then the pinned pip."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]  # get-pip.py's own options
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade"] + args))
'''

pytestmark = pytest.mark.skipif(not ANSIBLE_TEST.exists(),
                                reason="ansible-test is not installed next to this Python (it comes with ansible-core)")


def pip_version():
    """The pip version ansible-test bootstraps into its environments."""
    from ansible_test._internal.python_requirements import get_venv_packages  # pylint: disable=import-error

    class Python:
        version = PYTHON

    return get_venv_packages(Python)["pip"]


def collection_copy(root: Path) -> Path:
    dest = root / "ansible_collections" / "mlx_fleet" / "cluster"
    dest.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "output"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def test_sanity_of_the_plugins(tmp_path):
    cache = CACHE_HOME / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "get_pip_{0}.py".format(pip_version().replace(".", "_"))).write_text(GET_PIP_STAND_IN)
    args = [str(ANSIBLE_TEST), "sanity", "--local", "--python", PYTHON, "--color", "no"]
    args += [arg for test in SKIPPED for arg in ("--skip-test", test)]
    env = dict(os.environ, HOME=str(CACHE_HOME))
    run = subprocess.run(args, cwd=collection_copy(tmp_path), env=env, capture_output=True, text=True,
                         timeout=1800, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-8000:]
    ran = set(re.findall(r'Running sanity test "([\w-]+)"', output))
    assert EXPECTED <= ran, "not run: {0}".format(sorted(EXPECTED - ran))
