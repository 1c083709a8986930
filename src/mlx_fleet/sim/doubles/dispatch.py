"""Entry point of every macOS double inside a node: ``python3 dispatch.py TOOL ARGS...``.

The shims in /usr/local/bin exec this with their own name; each tool is the module
of the same name in the macsim package (``xcode-select`` -> ``xcode_select``).
"""

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from macsim.state import Fail  # noqa: E402


def run(tool: str, argv: list[str]) -> int:
    if tool == "_launchd_job":  # the detached supervisor launchctl starts for a job
        from macsim import launchctl

        return launchctl.supervise(argv[0])
    if tool == "_prepare_update":  # the detached preparation softwareupdate --install starts
        from macsim import softwareupdate

        return softwareupdate.prepare(argv[0])
    if tool != "boot":
        from macsim import replay

        recorded = replay.serve(tool, argv)  # a replayed real Mac's recorded output, if any
        if recorded is not None:
            return recorded
    module = importlib.import_module("macsim." + tool.replace("-", "_"))
    try:
        return module.main(argv)
    except Fail as e:
        sys.stdout.flush()
        sys.stderr.write(e.message)
        return e.code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
