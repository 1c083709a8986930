"""The CLI's exit statuses and the one-line error every user mistake becomes (never a traceback)."""

EXIT_OK = 0
EXIT_ATTENTION = 1  # the command ran; the cluster needs attention (a failure, drift, cables to plug in)
EXIT_BAD_INPUT = 2  # the command line or the inventory is wrong; nothing was changed
EXIT_BUSY = 3  # another run holds the cluster's output folder; this one did nothing
EXIT_UNREACHABLE = 4  # some Macs did not answer; the others were handled and reported
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake the user can fix, said in one line naming what to fix."""


class Busy(UserError):
    """Another run holds the cluster's output folder; the line names it."""


class Interrupted(Exception):
    """Ctrl-C, SIGTERM or SIGHUP stopped a run; the line names the Macs that may be mid-change."""
