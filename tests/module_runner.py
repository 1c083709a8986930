"""Run a module's main() as Ansible would, with its commands answered by recorded outputs.

The pattern of ansible-core's and community.general's module tests: the arguments go in through
``patch_module_args``, ``AnsibleModule.exit_json``/``fail_json`` raise with the result, and
``run_command`` answers from a table of real outputs (tests/fixtures/macos) while recording every
call, so a test sees exactly which commands a run would execute on the Mac.
"""

from __future__ import annotations

from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands

from conftest import FIXTURE_DIR, load


def fixture(name: str) -> str:
    """A capture's output, without its source line and prompt line."""
    return load(FIXTURE_DIR / name)


class ModuleExit(Exception):
    """exit_json or fail_json was called; result holds what the module returned."""

    def __init__(self, result: dict):
        super().__init__(result.get("msg", ""))
        self.result = result


class Commands:
    """Answers run_command from {(tool, *args): (rc, stdout, stderr)}; records each call.

    A value that is a list is one answer per call, in order (a re-read after a write sees the
    new state). A command missing from the table fails the test, as does a tool listed in
    ``missing`` being run: ``get_bin_path`` reports it absent, as on a Mac without it.
    """

    def __init__(self, answers: dict, missing: tuple[str, ...] = ()):
        self.answers = {key: list(value) if isinstance(value, list) else value for key, value in answers.items()}
        self.missing = missing
        self.calls: list[tuple[str, ...]] = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        if name in self.missing:
            if required:
                raise ModuleExit({"failed": True, "msg": "Failed to find required executable " + name})
            return None
        return "/usr/bin/" + name

    def run_command(self, args, **kwargs):
        assert isinstance(args, list), "run_command takes an argv list, got {0!r}".format(args)
        key = (args[0].rsplit("/", 1)[-1], *args[1:])
        self.calls.append(key)
        assert key in self.answers, "unexpected command {0}".format(" ".join(key))
        answer = self.answers[key]
        if isinstance(answer, list):
            assert answer, "{0} ran more often than the test expected".format(" ".join(key))
            return answer.pop(0)
        return answer

    def writes(self, tool: str, reads: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """The calls of tool that are not among reads, in order."""
        return [call for call in self.calls if call[0] == tool and call not in reads]


def run_module(main, args: dict, commands: Commands, check_mode=False, diff=False, tmpdir=None) -> dict:
    """Run main() with args; returns the result of exit_json or fail_json (failed=True)."""
    warnings: list[str] = []

    def exit_json(module, **result):
        raise ModuleExit(dict(result, warnings=warnings))

    def fail_json(module, msg, **result):
        raise ModuleExit(dict(result, failed=True, msg=msg, warnings=warnings))

    internal = {"_ansible_check_mode": check_mode, "_ansible_diff": diff}
    if tmpdir is not None:
        internal["_ansible_tmpdir"] = str(tmpdir)
    # The reads go through macos_commands.capture (Popen), the writes through run_command: both answer from the table.
    with patch_module_args(dict(args, **internal)), mock.patch.object(
            macos_commands, "capture", lambda module, argv: commands.run_command(list(argv))), mock.patch.multiple(
            basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json,
            warn=lambda module, warning: warnings.append(warning),
            run_command=lambda module, args, **kwargs: commands.run_command(args, **kwargs),
            get_bin_path=lambda module, name, required=False, opt_dirs=None: commands.get_bin_path(
                name, required, opt_dirs)):
        try:
            main()
        except ModuleExit as done:
            return done.result
    raise AssertionError("main() returned without exit_json or fail_json")
