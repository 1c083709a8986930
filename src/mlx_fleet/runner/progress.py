"""What a person sees of a run: the live line per step, and the summary it ends with."""

from __future__ import annotations

import shutil
import sys
import threading
from typing import TYPE_CHECKING

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import (
    CONTROLLER,
    _fabric_lines,
    _models_lines,
    _rdma_lines,
)

from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE

if TYPE_CHECKING:
    from mlx_fleet.runner.events import RunReport


def _width() -> int:
    """The live line's length: the terminal's width, less one column so it never wraps."""
    return max(80, shutil.get_terminal_size().columns - 1)


class Progress:
    """One live line per step on a terminal; plain lines otherwise. A step run on the controller (the
    inventory check, a step run once for the whole cluster) says so instead of counting Macs."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.live = stream.isatty()
        self.task = ""
        self.started: set[str] = set()
        self.done: set[str] = set()
        self.controller = False
        self.failures = 0
        self.step = 0
        self.detail = ""  # what the step reports while it runs (set_detail), after the Macs' count
        self._writing = threading.Lock()  # set_detail may come from another thread

    def _line(self) -> str:
        if self.controller:
            where = "on the controller"
        elif not self.done and len(self.started) <= 1:
            where = "..."  # one host so far: a Mac, or the controller under a Mac's name
        else:
            where = f"{len(self.done)}/{len(self.started)} Macs"
        return (f"[{self.step}] {self.task}: {where}" + (f", {self.failures} failed so far" if self.failures else "")
                + (f"; {self.detail}" if self.detail else ""))

    def _show(self) -> None:
        if self.live and self.task:
            with self._writing:
                self.stream.write("\r\033[K" + self._line()[:_width()])
                self.stream.flush()

    def set_detail(self, text: str) -> None:
        """TEXT after the Macs' count on the live line of the step running now (a transfer's bytes and rate)."""
        self.detail = text
        self._show()

    def _close_step(self) -> None:
        if not self.task:
            return
        if self.live:
            self.stream.write("\r\033[K" + self._line()[:_width()] + "\n")
        else:
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def task_start(self, name: str | None) -> None:
        """A new step; None: a step not shown (a role checking its variables)."""
        self._close_step()
        self.task, self.started, self.done, self.controller, self.detail = name or "", set(), set(), False, ""
        if name:
            self.step += 1
            self._show()

    def host_start(self, host: str) -> None:
        self.started.add(host)
        self.controller = self.controller or host == CONTROLLER
        self._show()

    def host_done(self, host: str, failed: bool, controller: bool = False) -> None:
        self.done.add(host)
        self.controller = self.controller or controller or host == CONTROLLER
        self.failures += failed
        self._show()

    def aside(self, text: str, stream) -> None:
        """Print TEXT on STREAM (another one, or the same) without mixing it into the live line."""
        if self.live and self.task:
            self.stream.write("\r\033[K")
            self.stream.flush()
        stream.write(text)
        stream.flush()
        self._show()

    def finish(self) -> None:
        self._close_step()
        self.task = ""


def print_summary(report: RunReport, stream=sys.stdout, extra: list[str] | None = None) -> int:
    """The lines a person acts on: what failed and where, what changed (plugin_utils.render.summary), where the
    outputs are, the exit status."""
    out = report.lines(extra)
    out.append(f"full output: {report.artifacts}/stdout ({report.seconds:.0f} s)")
    status = report.exit_status
    out.append({EXIT_OK: "result: ok", EXIT_ATTENTION: "result: the cluster needs attention (exit 1)",
                EXIT_BAD_INPUT: "result: fix the input above (exit 2)",
                EXIT_UNREACHABLE: "result: some Macs are unreachable (exit 4)"}[status]
               + (" (--check: nothing was changed)" if report.check else ""))
    print(terminal_text(out), file=stream)
    return status


def print_converge_summary(report: RunReport) -> int:
    """A converge's summary (converge, hostfile, checklist, onboard): the RDMA and fabric lines first."""
    return print_summary(report, extra=_rdma_lines(report) + _fabric_lines(report) + _models_lines(report))
