"""macsim doubles: stand-ins for the macOS command-line tools inside a simulated Mac.

Stdlib only: this package runs inside the node with Debian's /usr/bin/python3.
Each tool is a module exposing ``main(argv) -> int``; ``dispatch.py`` picks it.
"""
