"""Listen on every interface of the network namespace it runs in (a simulated Mac's) and write to argv[1] each
TCP segment whose payload is one line of letters and digits only: a models sync's receiver shows its token in
such a segment, first thing on a connection (to a Mac's listener or the controller's). Ends after argv[2] seconds."""

import re
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
LINE = re.compile(rb"^[0-9A-Za-z_-]{16,}\n$")

out, seconds = sys.argv[1], float(sys.argv[2])
sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
sniff.settimeout(1)
end = time.monotonic() + seconds
with open(out, "w") as found:
    found.write("listening\n")
    found.flush()
    while time.monotonic() < end:
        try:
            frame = sniff.recv(65535)
        except socket.timeout:
            continue
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:  # IPv4, TCP
            continue
        ip = frame[14:]
        tcp = ip[(ip[0] & 0x0F) * 4:]
        payload = tcp[(tcp[12] >> 4) * 4:struct.unpack("!H", ip[2:4])[0] - (ip[0] & 0x0F) * 4]
        if LINE.match(payload):
            found.write(payload.decode())
            found.flush()
