"""Shared test set-up: the collection importable by its FQCN, capture loading, sim fixtures.

The only conftest.py: test modules import names from it (`from conftest import load`), which
would be ambiguous with a second one."""

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# collections/ansible_collections/mlx_fleet/cluster links back to the repository root.
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO / "tests" / "sim"))

FIXTURE_DIR = REPO / "tests" / "fixtures" / "macos"


# A prompt line the source kept: "% cmd", "~ % cmd", "$ cmd", "user@host dir % cmd".
_PROMPT = re.compile(r"^(?:\S+(?: \S+)* )?[%$] \S")


def load(path):
    """The published output: without the '# source:' line and a leading prompt line."""
    lines = path.read_text().split("\n")
    assert lines[0].startswith("# source: "), path.name
    body = lines[1:]
    if body and _PROMPT.match(body[0]):
        body = body[1:]
    return "\n".join(body)


def pytest_collection_modifyitems(items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="macsim needs root")
        for item in items:
            if "sim" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def make_sim():
    """Build simulated clusters with the real `mlx-fleet sim up`; all are taken down afterwards."""
    from simlib import Sim

    made = []

    def make(**up_args):
        sim = Sim(**up_args)
        made.append(sim)
        return sim

    yield make
    for sim in made:
        sim.down()


class ModuleExit(Exception):
    """A module's exit_json or fail_json, raised so the test gets what it returned."""

    def __init__(self, result: dict):
        super().__init__(result.get("msg"))
        self.result = result


@pytest.fixture
def run_module(monkeypatch):
    """run(main, args): a module's main() as Ansible runs it (AnsibleModule reads args, including
    _ansible_check_mode and _ansible_diff); returns its result, with failed=True from fail_json."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def exit_json(self, **result):
        raise ModuleExit(result)

    def fail_json(self, msg, **result):
        raise ModuleExit(dict(result, failed=True, msg=msg))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def run(main, args: dict) -> dict:
        with patch_module_args(args), pytest.raises(ModuleExit) as done:
            main()
        return done.value.result

    return run
