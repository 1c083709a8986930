"""softwareupdate(8) --list: a simulated Mac is always up to date."""

from .state import Fail, err, out


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("-l", "--list"):
        raise Fail("softwareupdate: only --list is simulated\n", 1)
    out("Software Update Tool\n\nFinding available software\n")
    err("No new software available.\n")
    return 0
