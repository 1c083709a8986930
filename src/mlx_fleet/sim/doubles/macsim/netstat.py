"""netstat(1) is not simulated: no verbatim capture of macOS's `netstat -rn` is known (its
columns hold MAC addresses and link#N gateways of varying width), so a node refuses it instead
of running the host's Linux netstat, whose table a parser could take for a Mac's."""

from .state import Fail

EX_UNAVAILABLE = 69


def main(argv: list[str]) -> int:
    raise Fail("netstat: not simulated by macsim; read routes with route -n get, addresses with ifconfig\n",
               EX_UNAVAILABLE)
