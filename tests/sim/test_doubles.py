"""The macOS doubles against real captures (byte for byte) and against a fake iproute2.

The doubles run in-process (``dispatch.run``) with MACSIM_ROOT pointing at a temporary
node filesystem and MACSIM_IP at FAKE_IP, a small stateful stand-in for ``ip`` that
keeps links and routes in a JSON file and logs every call.
"""

import json
import os
import plistlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from mlx_fleet.sim import doubles

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "macos"
sys.path.insert(0, str(doubles.HERE))
import dispatch  # noqa: E402

FAKE_IP = r'''
import ipaddress, json, os, sys
state_path = os.environ["FAKE_IP_STATE"]
with open(state_path) as f:
    st = json.load(f)
with open(state_path + ".log", "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
args = [a for a in sys.argv[1:] if a not in ("-j", "-d", "-4", "-s")]

def fail(msg):
    sys.stderr.write(msg + "\n"); sys.exit(2)

def link(name):
    for l in st["links"]:
        if l["ifname"] == name:
            return l
    fail(f'Cannot find device "{name}"')

def norm(dst):
    return dst[:-3] if dst.endswith("/32") else ("default" if dst in ("0.0.0.0/0",) else dst)

def covering(gw):
    for r in st["routes"]:
        if r.get("protocol") == "kernel" and ipaddress.IPv4Address(gw) in ipaddress.IPv4Network(r["dst"]):
            return r["dev"]
    fail("Error: Nexthop has invalid gateway.")

if "-j" in sys.argv:
    print(json.dumps(st["links"] if args[0] == "addr" else st.get("neigh", []) if args[0] == "neigh" else st["routes"]))
    sys.exit(0)
if args[:2] == ["link", "set"]:
    l = link(args[2])
    l["flags"] = [f for f in l["flags"] if f != "UP"] + (["UP"] if args[3] == "up" else [])
elif args[0] == "addr":
    op, cidr = args[1], args[2]
    if op == "flush":
        l = link(args[-1])
        gone = [a["local"] for a in l["addr_info"] if a["family"] == "inet"]
        l["addr_info"] = [a for a in l["addr_info"] if a["family"] != "inet"]
        st["routes"] = [r for r in st["routes"] if r.get("prefsrc") not in gone]
    else:
        l = link(args[args.index("dev") + 1])
        local, plen = cidr.split("/")
        net = str(ipaddress.IPv4Network(cidr, strict=False))
        l["addr_info"] = [a for a in l["addr_info"] if a.get("local") != local]
        st["routes"] = [r for r in st["routes"] if r.get("prefsrc") != local]
        if op == "replace":
            entry = {"family": "inet", "local": local, "prefixlen": int(plen)}
            if "broadcast" in args:
                entry["broadcast"] = args[args.index("broadcast") + 1]
            l["addr_info"].append(entry)
            st["routes"].append({"dst": net, "dev": l["ifname"], "protocol": "kernel", "scope": "link", "prefsrc": local, "flags": []})
elif args[0] == "route":
    op, dst = args[1], norm(args[2])
    existing = [r for r in st["routes"] if r["dst"] == dst]
    if op == "del":
        if not existing:
            fail("RTNETLINK answers: No such process")
        st["routes"].remove(existing[0])
    else:
        if op == "add" and existing:
            fail("RTNETLINK answers: File exists")
        if op == "change" and not existing:
            fail("RTNETLINK answers: No such file or directory")
        route = {"dst": dst, "flags": []}
        if "via" in args:
            route["gateway"] = args[args.index("via") + 1]
        route["dev"] = args[args.index("dev") + 1] if "dev" in args else covering(route["gateway"])
        link(route["dev"])
        st["routes"] = [r for r in st["routes"] if r["dst"] != dst] + [route]
with open(state_path, "w") as f:
    json.dump(st, f)
'''


def iface(index, name, mac, up=True, carrier=True, addrs=()):
    flags = ["BROADCAST", "MULTICAST"] + (["UP"] if up else []) + ([] if carrier else ["NO-CARRIER"])
    return {"ifindex": index, "ifname": name, "flags": flags, "mtu": 1500, "address": mac,
            "operstate": "UP" if up and carrier else "DOWN", "addr_info": list(addrs)}


def inet(local, prefixlen, **extra):
    return {"family": "inet", "local": local, "prefixlen": prefixlen, **extra}


def mini(**overrides) -> dict:
    """An M4 Pro Mac mini with three TB5 ports, all cabled to RDMA-enabled Macs (TN3205's mesh)."""
    peer = {"name": "Mac mini", "model_id": "Mac16,11", "domain_uuid": "E4CCB4B9-724D-4728-ADE2-F356148F8F79"}
    node = {
        "name": "mini-1", "model": "mini-m4-pro", "model_name": "Mac mini", "model_id": "Mac16,11",
        "chip": "Apple M4 Pro", "cpu_cores": "14 (10 performance and 4 efficiency)", "memory_gb": 64,
        "serial": "H7X2K4QW9Y", "hardware_uuid": "6D9530A4-90A2-5A28-B133-3D6011CC7772",
        "provisioning_udid": "00008600-001E20D40168401E", "os_version": "26.2", "os_build": "25C56",
        "boot_rom": "13822.61.10", "rdma_enabled": True, "in_recovery": False, "sudo": "nopasswd",
        "rdma_guid": "e0c5797d9c8fac05",
        "interfaces": [
            {"hardware_port": "Ethernet", "device": "en0", "mac": "3c:a6:f6:00:00:01", "management": True},
            {"hardware_port": "Wi-Fi", "device": "en1", "mac": "3c:a6:f6:00:00:02"},
            {"hardware_port": "Thunderbolt 1", "device": "en2", "mac": "36:4d:04:ea:4e:40"},
            {"hardware_port": "Thunderbolt 2", "device": "en3", "mac": "36:4d:04:ea:4e:44"},
            {"hardware_port": "Thunderbolt 3", "device": "en4", "mac": "36:4d:04:ea:4e:48"},
        ],
        "management": {"device": "en0", "ip": "10.213.3.11", "prefix": 24, "router": "10.213.3.1"},
        "thunderbolt": [
            {"receptacle": n, "bus": n - 1, "device": f"en{n + 1}", "domain_uuid": f"00000000-0000-4000-8000-00000000000{n}",
             "switch_uid": f"0x05AC00000000000{n}", "generation": 5, "rdma_ok": True,
             "link": {"kind": "mac", "speed_gbps": 80, "peer": dict(peer)}}
            for n in (1, 2, 3)
        ],
    }
    node.update(overrides)
    return node


def links_of(node) -> list[dict]:
    """Live interfaces of a freshly booted node, before boot has applied anything."""
    entries = [iface(1, "lo", "00:00:00:00:00:00", addrs=[inet("127.0.0.1", 8)])]
    for n, port in enumerate(node["interfaces"], start=2):
        entries.append(iface(n if port["device"] != "en2" else 11, port["device"], port["mac"], up=False))
    entries.append(iface(20, "bridge0", "36:4d:04:ea:4e:00"))
    return entries


class Node:
    """A node filesystem plus the fake iproute2's state, and a way to run tools against them."""

    def __init__(self, root: Path, monkeypatch, capsys, node: dict):
        self.root, self.capsys, self.monkeypatch = root, capsys, monkeypatch
        self.write_node(node)
        self.net_state = root / "fake-ip.json"
        self.net = {"links": links_of(node), "routes": []}
        fake = root / "fake-ip"
        fake.write_text(f"#!{sys.executable}\n{FAKE_IP}")
        fake.chmod(0o755)
        monkeypatch.setenv("MACSIM_ROOT", str(root))
        monkeypatch.setenv("MACSIM_IP", str(fake))
        monkeypatch.setenv("FAKE_IP_STATE", str(self.net_state))

    def write_node(self, node):
        p = self.root / "usr/local/libexec/macsim/node.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(node))

    @property
    def node(self) -> dict:
        return json.loads((self.root / "usr/local/libexec/macsim/node.json").read_text())

    @property
    def net(self) -> dict:
        return json.loads(self.net_state.read_text())

    @net.setter
    def net(self, value):
        self.net_state.write_text(json.dumps(value))

    def link(self, name) -> dict:
        return next(l for l in self.net["links"] if l["ifname"] == name)

    def prefs(self, name, data):
        p = self.root / "Library/Preferences/SystemConfiguration" / f"{name}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))

    def run(self, tool, *args, uid=0):
        self.monkeypatch.setattr(os, "geteuid", lambda: uid)
        self.capsys.readouterr()
        rc = dispatch.run(tool, list(args))
        captured = self.capsys.readouterr()
        return rc, captured.out, captured.err

    def out(self, tool, *args, uid=0) -> str:
        rc, out, err = self.run(tool, *args, uid=uid)
        assert rc == 0, err
        return out

    def reboot(self):
        """What the controller does: flush addresses and routes, ports down, wipe run/, run boot."""
        net = self.net
        for l in net["links"]:
            if l["ifname"] != "lo":
                l["addr_info"] = [a for a in l["addr_info"] if a["family"] != "inet"]
                l["flags"] = [f for f in l["flags"] if f != "UP"]
        net["routes"] = []
        self.net = net
        run = self.root / "usr/local/libexec/macsim/run"
        if run.exists():
            subprocess.run(["rm", "-rf", str(run)], check=True)
        assert self.run("boot")[0] == 0


@pytest.fixture
def make_node(tmp_path, monkeypatch, capsys):
    def make(node=None):
        return Node(tmp_path, monkeypatch, capsys, node or mini())

    return make


def capture(path: Path) -> str:
    """A capture's output: without the '# source:' line and any '% cmd' / '$ cmd' prompt line."""
    lines = path.read_text().split("\n")[1:]
    if lines and (lines[0].startswith(("$ ", "% ")) or " % " in lines[0]):
        lines = lines[1:]
    return "\n".join(lines)


def assert_lines_in_order(expected: str, actual: str) -> None:
    """Every line the capture shows appears in the output, in order ('...' marks elisions)."""
    remaining = actual.split("\n")
    for line in expected.split("\n"):
        if line in ("...", ""):
            continue
        assert line in remaining, f"{line!r} missing (or out of order) in:\n{actual}"
        remaining = remaining[remaining.index(line) + 1 :]


def tn3205(text: str) -> str:
    """The TN3205 copy renders each tab as four spaces and drops trailing spaces."""
    return "\n".join(l.rstrip() for l in text.replace("\t", "    ").split("\n"))


# --- system_profiler --------------------------------------------------------------------------

def omlx_macbook() -> dict:
    studio = {"name": "Mac Studio", "model_id": "Mac15,14", "domain_uuid": "28CA4C30-A263-4C55-B302-953416D0B209"}
    tb = [
        (2, 3, "AD089FC0-E653-4FFE-B00A-DFF110B2F9A1", "0x05ACBE5E06781982", "0.0.0", None),
        (1, 2, "200E23D3-C921-44E0-95F7-55144AC251CC", "0x05ACBE5E06781981", None, None),
        (0, 1, "817DCFA4-B481-4100-80FC-91C7AA969F0B", "0x05ACBE5E06781980", "0.0.0",
         {"kind": "mac", "speed_gbps": 80, "peer": studio}),
    ]
    return mini(model="macbook-pro-m5-max", model_name="MacBook Pro", model_id="Mac17,7", thunderbolt=[
        {"bus": bus, "receptacle": r, "device": f"en{r}", "domain_uuid": uuid, "switch_uid": uid,
         "generation": 5, "rdma_ok": True, "micro_version": micro, "link": link}
        for bus, r, uuid, uid, micro, link in tb
    ])


def test_thunderbolt_json_is_the_reference_byte_for_byte(make_node):
    node = make_node(omlx_macbook())
    expected = capture(FIXTURES / "system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt")
    assert node.out("system_profiler", "SPThunderboltDataType", "-json") == expected.rstrip("\n")


@pytest.mark.parametrize("value", [
    {}, [], {"b": [], "a": {}}, [1, -2.5, 1e300, True, False, None],
    {"é": "tab\t quote\" back\\ nul\x00 bell\x07 ünï ✓", "z": {"y": [{"x": 0}]}},
])
def test_the_doubles_json_without_the_json_module_is_json_s(value):
    from macsim import state, system_profiler

    text = json.dumps(value, indent=2, separators=(",", " : "), sort_keys=True, ensure_ascii=False)
    assert system_profiler.dumps(value) == text
    assert state.loads(f"  {text}\n") == value


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} 2', "nope"])
def test_the_doubles_json_reader_refuses_what_json_refuses(text):
    from macsim import state

    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        state.loads(text)


def test_several_data_types_give_one_object(make_node):
    node = make_node()
    data = json.loads(node.out("system_profiler", "SPHardwareDataType", "SPThunderboltDataType", "-json"))
    assert list(data) == ["SPHardwareDataType", "SPThunderboltDataType"]
    assert [e["_name"] for e in data["SPThunderboltDataType"]] == [
        "thunderboltusb4_bus_2", "thunderboltusb4_bus_1", "thunderboltusb4_bus_0"]


def test_thunderbolt_empty_ports_drives_and_docks(make_node):
    node = mini(model_name="Mac mini")
    mac = {"name": "Mac mini", "model_id": "Mac16,10", "domain_uuid": "AAAAAAAA-0000-4000-8000-000000000001"}
    node["thunderbolt"][0]["link"] = None
    node["thunderbolt"][0]["generation"] = 4
    node["thunderbolt"][1]["link"] = {"kind": "drive", "speed_gbps": 40, "name": "T9", "vendor": "Samsung"}
    node["thunderbolt"][2]["link"] = {"kind": "dock", "speed_gbps": 40, "name": "TS4", "vendor": "CalDigit", "behind": mac}
    data = json.loads(make_node(node).out("system_profiler", "SPThunderboltDataType", "-json"))
    by_port = {e["receptacle_1_tag"]["receptacle_id_key"]: e for e in data["SPThunderboltDataType"]}
    assert by_port["1"]["receptacle_1_tag"]["current_speed_key"] == "Up to 40 Gb/s"
    assert by_port["1"]["receptacle_1_tag"]["receptacle_status_key"] == "receptacle_no_devices_connected"
    assert "_items" not in by_port["1"]
    drive = by_port["2"]["_items"][0]
    assert drive["_name"] == "T9" and "domain_uuid_key" not in drive
    dock = by_port["3"]["_items"][0]
    assert "domain_uuid_key" not in dock and dock["_items"][0]["domain_uuid_key"] == mac["domain_uuid"]
    assert by_port["3"]["receptacle_1_tag"]["current_speed_key"] == "40 Gb/s"


def test_thunderbolt_text_form(make_node):
    text = make_node(omlx_macbook()).out("system_profiler", "SPThunderboltDataType")
    assert text.startswith("Thunderbolt/USB4:\n\n    Thunderbolt/USB4 Bus 2:\n\n      Vendor Name: Apple Inc.\n")
    assert "          Speed: 80 Gb/s\n          Receptacle: 1\n          Micro Firmware Version: 0.0.0\n\n" \
           "        Mac Studio:\n\n          Vendor Name: Apple Inc.\n          Device Name: Mac15,14\n" in text


@pytest.mark.parametrize("name, fields", [
    ("system_profiler-SPHardwareDataType-json__inventory-go-test-macstudio__2.txt",
     dict(model_name="Mac Studio", model_id="Mac14,14", chip="Apple M2 Ultra", memory_gb=64, boot_rom="18000.121.3",
          model_number="Z180000AEBZ/A", number_processors="proc 24:16:8:0", serial="XXXXXXXXXX",
          hardware_uuid="00000000-1111-2222-3333-444444444444", provisioning_udid="00000000-0000000000000000")),
    ("system_profiler-SPHardwareDataType-json__mondoo-go-test__1.txt",
     dict(model_name="MacBook Pro", model_id="Mac16,5", chip="Apple M4 Max", memory_gb=48, boot_rom="11881.140.96",
          model_number="Z1FS0002ULL/A", cpu_cores="16 (12 performance and 4 efficiency)", serial="C6XW4X7JX1",
          hardware_uuid="6D9530A4-90A2-5A28-B133-3D6011CC7772", provisioning_udid="00008400-001E20D40168401E")),
])
def test_hardware_json_matches_captures(make_node, name, fields):
    node = make_node(mini(activation_lock_status="activation_lock_enabled", **fields))
    assert node.out("system_profiler", "SPHardwareDataType", "-json") == capture(FIXTURES / name).rstrip("\n")


def test_hardware_text_form(make_node):
    text = make_node().out("system_profiler", "SPHardwareDataType")
    assert "      Chip: Apple M4 Pro\n      Total Number of Cores: 14 (10 performance and 4 efficiency)\n" in text


# --- ibv_devices, ibv_devinfo, rdma_ctl ---------------------------------------------------------

def test_ibv_devices_matches_tn3205(make_node):
    expected = capture(FIXTURES / "ibv_devices__apple-tn3205__3.txt")
    assert tn3205(make_node().out("ibv_devices")) == expected.rstrip("\n") + "\n"


def test_ibv_devices_matches_mlx_docs_m3_ultra(make_node):
    node = mini(rdma_guid="8096a9d9edbaac05", thunderbolt=[
        {"receptacle": r, "bus": r - 1, "device": f"en{r + 1}", "domain_uuid": f"U{r}", "switch_uid": f"0x{r}",
         "generation": 5, "rdma_ok": r != 1, "link": None}
        for r in (1, 2, 4, 3, 5, 6)  # the order that Mac enumerated them in
    ])
    expected = capture(FIXTURES / "ibv_devices__ml-explore-mlx-docs__1.txt")
    text = make_node(node).out("ibv_devices")
    assert "\n".join(l[4:] for l in text.split("\n")) == expected.rstrip("\n") + "\n"


def test_ibv_devices_is_empty_with_rdma_disabled(make_node):
    text = make_node(mini(rdma_enabled=False)).out("ibv_devices")
    assert [l for l in text.split() if l.startswith("rdma_")] == []
    assert text.startswith("    device")


def test_ibv_devinfo_matches_tn3205(make_node):
    expected = capture(FIXTURES / "ibv_devinfo__apple-tn3205__1.txt")
    assert_lines_in_order(expected, tn3205(make_node().out("ibv_devinfo")))


def test_port_is_down_unless_rdma_on_both_ends_of_a_direct_cable(make_node):
    node = mini()
    node["thunderbolt"][0]["link"]["peer"]["rdma_enabled"] = False
    node["thunderbolt"][1]["rdma_ok"] = False
    node["thunderbolt"][2]["link"] = {"kind": "dock", "speed_gbps": 40, "name": "Dock", "vendor": "X",
                                      "behind": node["thunderbolt"][0]["link"]["peer"]}
    n = make_node(node)
    for dev in ("rdma_en2", "rdma_en3", "rdma_en4"):
        assert "state:\t\t\tPORT_DOWN (1)" in n.out("ibv_devinfo", "-d", dev)
    assert n.run("ibv_devinfo", "-d", "rdma_en9")[0] != 0


def test_rdma_ctl_only_works_in_recovery(make_node):
    n = make_node(mini(rdma_enabled=False))
    assert n.out("rdma_ctl", "status") == "disabled\n"
    assert n.run("rdma_ctl", "enable") == (77, "", "rdma_ctl: This tool needs to be executed from Recovery OS.\n")
    n.write_node(mini(rdma_enabled=False, in_recovery=True))
    assert n.run("rdma_ctl", "enable")[0] == 0
    assert n.node["nvram_rdma"] is True and n.node["rdma_enabled"] is False  # applied at the next boot


# --- networksetup ---------------------------------------------------------------------------

def test_listallhardwareports_matches_untrimmed_capture(make_node):
    ports = [("Bluetooth DUN", "Bluetooth-Modem", "N/A"), ("Thunderbolt Ethernet", "en1", "40:6c:8f:3d:6b:b3"),
             ("Wi-Fi", "en0", "14:10:9f:ce:fd:95"), ("Bluetooth PAN", "en2", "N/A"),
             ("Thunderbolt 1", "en3", "32:00:19:a6:f6:20"), ("Thunderbolt 2", "en4", "32:00:19:a6:f6:21")]
    node = mini(interfaces=[{"hardware_port": p, "device": d, "mac": m} for p, d, m in ports])
    expected = capture(FIXTURES / "networksetup-listallhardwareports__network-info-script__1.txt")
    assert make_node(node).out("networksetup", "-listallhardwareports") == expected


def test_listallhardwareports_has_the_knurlogic_ports(make_node):
    names = [("Ethernet", "en0")] + [(f"Ethernet Adapter (en{n})", f"en{n}") for n in range(8, 14)] + [("Wi-Fi", "en1")]
    names += [(f"Thunderbolt {n}", f"en{n + 1}") for n in range(1, 7)]
    node = mini(interfaces=[{"hardware_port": p, "device": d, "mac": "aa:bb:cc:dd:ee:ff"} for p, d in names])
    text = make_node(node).out("networksetup", "-listallhardwareports")
    assert_lines_in_order(capture(FIXTURES / "networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt"), text)


def test_fresh_services_and_order(make_node):
    n = make_node()
    assert n.out("networksetup", "-listnetworkserviceorder") == (
        "An asterisk (*) denotes that a network service is disabled.\n"
        "(1) Ethernet\n(Hardware Port: Ethernet, Device: en0)\n\n"
        "(2) Wi-Fi\n(Hardware Port: Wi-Fi, Device: en1)\n\n"
        "(3) Thunderbolt Bridge\n(Hardware Port: Thunderbolt Bridge, Device: bridge0)\n\n")
    assert n.out("networksetup", "-listallnetworkservices") == (
        "An asterisk (*) denotes that a network service is disabled.\nEthernet\nWi-Fi\nThunderbolt Bridge\n")


def test_listnetworkserviceorder_matches_capture(make_node):
    rows = [("Thunderbolt Ethernet", "Thunderbolt Ethernet", "en1", True), ("Wi-Fi", "Wi-Fi", "en0", True),
            ("Bluetooth DUN", "Bluetooth DUN", "Bluetooth-Modem", True), ("USB Ethernet", "USB-Ethernet", "en5", False),
            ("Bluetooth PAN", "Bluetooth PAN", "en2", True), ("Thunderbolt Bridge", "Thunderbolt Bridge", "bridge0", True)]
    n = make_node()
    n.prefs("preferences", {"NetworkServices": [
        {"name": s, "hardware_port": p, "device": d, "enabled": e, "ipv4": {"method": "DHCP"}, "routes": []}
        for s, p, d, e in rows]})
    expected = capture(FIXTURES / "networksetup-listnetworkserviceorder__network-info-script__1.txt")
    assert n.out("networksetup", "-listnetworkserviceorder") == expected.rstrip("\n") + "\n\n"


def test_getinfo_dhcp_matches_capture(make_node):
    node = mini(interfaces=[{"hardware_port": "Thunderbolt Ethernet", "device": "en1", "mac": "00:3e:e1:be:06:59"}])
    n = make_node(node)
    net = n.net
    net["links"][1]["addr_info"] = [inet("130.235.16.211", 23)]
    net["routes"] = [{"dst": "default", "gateway": "130.235.16.1", "dev": "en1", "flags": []}]
    n.net = net
    n.prefs("preferences", {"NetworkServices": [
        {"name": "Ethernet 1", "hardware_port": "Thunderbolt Ethernet", "device": "en1", "enabled": True,
         "ipv4": {"method": "DHCP"}, "routes": []}]})
    expected = capture(FIXTURES / "networksetup-getinfo__network-info-script__1.txt")
    assert n.out("networksetup", "-getinfo", "Ethernet 1") == expected


def wifi_node(make_node, addrs=(), router=None):
    """A Mac whose Wi-Fi (en1) has a DHCP service named Wi-Fi and no additional routes."""
    node = mini(interfaces=[{"hardware_port": "Wi-Fi", "device": "en1", "mac": "f8:1e:df:e8:46:66"}])
    n = make_node(node)
    net = n.net
    net["links"][1]["addr_info"] = list(addrs)
    net["routes"] = [{"dst": "default", "gateway": router, "dev": "en1", "flags": []}] if router else []
    n.net = net
    n.prefs("preferences", {"NetworkServices": [
        {"name": "Wi-Fi", "hardware_port": "Wi-Fi", "device": "en1", "enabled": True,
         "ipv4": {"method": "DHCP"}, "routes": []}]})
    return n


def test_getinfo_dhcp_without_a_lease_matches_capture(make_node):
    expected = capture(FIXTURES / "networksetup-getinfo__wifi-debug-notes__2.txt")
    assert wifi_node(make_node).out("networksetup", "-getinfo", "Wi-Fi") == expected


def test_getinfo_dhcp_without_a_router_prints_null(make_node):
    # The capture is a USB adapter's wired service, whose last line says Ethernet Address instead.
    n = wifi_node(make_node, addrs=[inet("169.254.31.164", 16)])
    expected = capture(FIXTURES / "networksetup-getinfo__usb-lan-blog__3.txt").split("\n")[:-2]
    assert [line.rstrip() for line in n.out("networksetup", "-getinfo", "Wi-Fi").split("\n")[:-2]] == expected


def test_getadditionalroutes_without_routes_matches_capture(make_node):
    expected = capture(FIXTURES / "networksetup-getadditionalroutes__wifi-debug-notes__2.txt")
    assert wifi_node(make_node).out("networksetup", "-getadditionalroutes", "Wi-Fi") == expected


def test_unknown_service_and_non_root(make_node):
    n = make_node()
    assert n.run("networksetup", "-getinfo", "Nope") == (
        4, "", "Nope is not a recognized network service.\n** Error: The parameters were not valid.\n")
    rc, _, err = n.run("networksetup", "-setmanual", "Ethernet", "10.0.0.2", "255.255.255.0", uid=501)
    assert (rc, err) == (14, "** Error: Command requires admin privileges.\n")


def test_per_port_service_is_applied_live_and_survives_reboot(make_node):
    n = make_node()
    n.reboot()
    assert n.link("en0")["addr_info"][0]["local"] == "10.213.3.11"
    assert {"dst": "default", "gateway": "10.213.3.1", "dev": "en0", "flags": []} in n.net["routes"]
    assert "UP" in n.link("en2")["flags"] and "UP" in n.link("bridge0")["flags"]
    n.out("networksetup", "-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1")
    n.out("networksetup", "-setmanual", "Thunderbolt 1", "192.168.10.1", "255.255.255.0")
    n.out("networksetup", "-setadditionalroutes", "Thunderbolt 1", "192.168.20.0", "255.255.255.0", "192.168.10.2")
    assert n.link("en2")["addr_info"] == [inet("192.168.10.1", 24, broadcast="192.168.10.255")]
    assert any(r["dst"] == "192.168.20.0/24" and r.get("gateway") == "192.168.10.2" for r in n.net["routes"])
    info = n.out("networksetup", "-getinfo", "Thunderbolt 1")
    assert info.startswith("Manual Configuration\nIP address: 192.168.10.1\nSubnet mask: 255.255.255.0\nRouter: (null)\n")
    assert n.out("networksetup", "-getadditionalroutes", "Thunderbolt 1") == "192.168.20.0 255.255.255.0 192.168.10.2\n"
    n.reboot()
    assert n.link("en2")["addr_info"] == [inet("192.168.10.1", 24, broadcast="192.168.10.255")]
    assert any(r["dst"] == "192.168.20.0/24" for r in n.net["routes"])
    n.out("networksetup", "-setnetworkserviceenabled", "Thunderbolt 1", "off")
    assert n.link("en2")["addr_info"] == [] and n.out("networksetup", "-getnetworkserviceenabled", "Thunderbolt 1") == "Disabled\n"
    n.out("networksetup", "-removenetworkservice", "Thunderbolt 1")
    assert "Thunderbolt 1" not in n.out("networksetup", "-listallnetworkservices")


def test_disabling_the_thunderbolt_bridge_keeps_it_down_after_reboot(make_node):
    n = make_node()
    n.reboot()
    n.out("networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off")
    assert "UP" not in n.link("bridge0")["flags"]
    n.reboot()
    assert "UP" not in n.link("bridge0")["flags"]
    assert "member:" not in n.out("ifconfig", "bridge0")
    assert n.out("networksetup", "-listnetworkserviceorder").count("(*) Thunderbolt Bridge\n") == 1
    # Switched on again (an update does it), the bridge takes the Thunderbolt ports back at once.
    n.out("networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "on")
    assert "UP" in n.link("bridge0")["flags"]
    assert [line.split()[1] for line in n.out("ifconfig", "bridge0").splitlines()
            if line.strip().startswith("member:")] == [p["device"] for p in n.node["thunderbolt"]]


# --- ifconfig, route, ipconfig ------------------------------------------------------------------

def tn3205_node(make_node) -> Node:
    n = make_node()
    net = n.net
    for l in net["links"]:
        l["flags"].append("UP")
        l["operstate"] = "UP"
    en2 = next(l for l in net["links"] if l["ifname"] == "en2")
    en2["addr_info"] = [{"family": "inet6", "local": "fe80::1021:1bac:fe1:b5e3", "prefixlen": 64, "scope": "link"},
                        inet("169.254.205.255", 16, broadcast="169.254.255.255")]
    for l, index in zip(net["links"][4:6], (12, 13)):
        l["ifindex"] = index
    n.net = net
    return n


def test_ifconfig_en2_matches_tn3205(make_node):
    expected = capture(FIXTURES / "ifconfig-en2__apple-tn3205__1.txt")
    assert tn3205(tn3205_node(make_node).out("ifconfig", "en2")) == expected.rstrip("\n") + "\n"


def test_ifconfig_bridge0_matches_tn3205(make_node):
    # Apple's copy lost a space in one line ('ifmaxaddr 0port 12').
    expected = capture(FIXTURES / "ifconfig-bridge0__apple-tn3205__1.txt").replace("0port", "0 port")
    assert_lines_in_order(expected, tn3205(tn3205_node(make_node).out("ifconfig", "bridge0")))


def test_ifconfig_bridge0_matches_the_intel_capture(make_node):
    node = mini(thunderbolt=[dict(mini()["thunderbolt"][0], device=d) for d in ("en1", "en2", "en3", "en4")])
    n = make_node(node)
    net = n.net
    net["links"] = [iface(i, d, "d2:00:a0:43:10:00", carrier=False) for d, i in
                    (("en1", 6), ("en2", 8), ("en3", 7), ("en4", 9))] + [iface(10, "bridge0", "d2:00:a0:43:10:00")]
    n.net = net
    lines = capture(FIXTURES / "ifconfig__bmidgley-citizen-scientist__1.txt").split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("bridge0:"))
    block = lines[start : next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("\t"))]
    assert n.out("ifconfig", "bridge0") == "\n".join(block) + "\n"


def test_mlx_distributed_config_setup_runs_as_on_a_mac(make_node):
    n = make_node()
    n.reboot()
    assert n.run("ifconfig", "bridge0", "down")[0] == 0
    assert n.run("ifconfig", "en2", "inet", "192.168.0.1", "netmask", "255.255.255.252")[0] == 0
    assert n.run("route", "change", "192.168.0.2", "-interface", "en2") == (
        0, "change host 192.168.0.2: gateway en2\n", "")
    assert "UP" not in n.link("bridge0")["flags"]
    assert n.out("ipconfig", "getifaddr", "en2") == "192.168.0.1\n"
    text = n.out("ifconfig", "en2")
    assert "\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\n" in text
    n.reboot()  # ifconfig and route changes are runtime only
    assert n.run("ipconfig", "getifaddr", "en2") == (1, "", "")
    assert "UP" in n.link("bridge0")["flags"]


def test_route_errors(make_node):
    n = make_node()
    assert n.run("route", "change", "192.168.0.2", "-interface", "en2") == (
        1, "change host 192.168.0.2: gateway en2: not in table\n", "route: writing to routing socket: not in table\n")
    assert n.run("route", "add", "-host", "192.168.0.2", "-interface", "en2", uid=501) == (
        77, "", "route: must be root to alter routing table\n")
    assert n.run("route", "-n", "add", "-net", "10.9.0.0/16", "-interface", "en2") == (
        0, "add net 10.9.0.0: gateway en2\n", "")
    assert n.run("route", "-n", "add", "-net", "10.9.0.0/16", "-interface", "en2")[0] == 1
    assert n.run("route", "-n", "delete", "-net", "10.9.0.0/16") == (0, "delete net 10.9.0.0\n", "")
    assert n.run("route", "-n", "get", "10.1.1.1") == (0, "", "route: writing to routing socket: not in table\n")


def test_route_get_matches_capture(make_node):
    n = make_node(mini(interfaces=[{"hardware_port": "Wi-Fi", "device": "en1", "mac": "aa:bb:cc:dd:ee:ff"}]))
    net = n.net
    net["routes"] = [{"dst": "default", "gateway": "192.168.1.1", "dev": "en1", "flags": []}]
    n.net = net
    assert n.out("route", "-n", "get", "192.0.43.10") == capture(FIXTURES / "route-n-get__real-world-systems__1.txt")


def test_route_get_of_an_on_link_peer_matches_capture(make_node):
    n = make_node(mini())
    net = n.net
    net["routes"] = [{"dst": "default", "gateway": "192.168.1.1", "dev": "en0", "flags": []},
                     {"dst": "192.168.1.0/24", "dev": "en0", "protocol": "kernel", "scope": "link", "flags": []}]
    net["neigh"] = [{"dst": "192.168.1.1", "dev": "en0", "lladdr": "a4:83:e7:00:00:01", "confirmed": 12,
                     "state": ["REACHABLE"]}]
    n.net = net
    expected = capture(FIXTURES / "route-n-get__barrier-routing-blog__1.txt")
    assert [line.rstrip() for line in n.out("route", "-n", "get", "192.168.1.1").split("\n")] == expected.split("\n")
    # Without an ARP entry (nobody talked to it yet) the interface route answers; not a router: no ROUTER.
    assert "destination: 192.168.1.0\n" in n.out("route", "-n", "get", "192.168.1.7")
    net["neigh"].append({"dst": "192.168.1.7", "dev": "en0", "lladdr": "a4:83:e7:00:00:07", "confirmed": 0, "state": ["STALE"]})
    n.net = net
    assert "flags: <UP,HOST,DONE,LLINFO,WASCLONED,IFSCOPE,IFREF>\n" in n.out("route", "-n", "get", "192.168.1.7")


def test_netstat_is_refused_rather_than_answered_by_linux(make_node):
    rc, out, err = make_node().run("netstat", "-rn")
    assert (rc, out) == (69, "") and err.startswith("netstat: not simulated by macsim;")


def test_ifconfig_aliases_and_permissions(make_node):
    n = make_node()
    n.run("ifconfig", "en3", "10.0.0.1/24")
    n.run("ifconfig", "en3", "inet", "10.0.1.1", "netmask", "0xffffff00", "alias")
    assert [a["local"] for a in n.link("en3")["addr_info"]] == ["10.0.0.1", "10.0.1.1"]
    n.run("ifconfig", "en3", "inet", "10.0.0.1", "-alias")
    assert [a["local"] for a in n.link("en3")["addr_info"]] == ["10.0.1.1"]
    assert n.run("ifconfig", "en3", "up", uid=501) == (1, "", "ifconfig: ioctl (SIOCSIFFLAGS): Operation not permitted\n")
    assert n.run("ifconfig", "en9") == (1, "", "ifconfig: interface en9 does not exist\n")
    assert n.out("ifconfig", "-l") == "lo0 en0 en1 en2 en3 en4 bridge0\n"
    assert n.out("ifconfig").startswith("lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384\n")


# --- small tools ----------------------------------------------------------------------------

def test_sw_vers_matches_capture(make_node):
    n = make_node(mini(os_version="14.2.1", os_build="23C71"))
    assert n.out("sw_vers") == capture(FIXTURES / "sw_vers__sudo-is-man-pmset__1.txt")
    assert n.out("sw_vers", "-productVersion") == "14.2.1\n"
    assert n.out("sw_vers", "-buildVersion") == "23C71\n"


def test_sw_vers_of_a_security_response_reads_as_the_capture(make_node):
    capture_path = FIXTURES / "sw_vers-security-response__zenn-dart-templates-47655362706__1.txt"
    n = make_node(mini(os_version="13.4.1", os_build="22F770820d", os_version_extra="(c)"))
    assert mp.parse_sw_vers(n.out("sw_vers")) == mp.parse_sw_vers(capture(capture_path))
    assert n.out("sw_vers", "-productVersionExtra") == "(c)\n"


def test_sysctl_matches_captures(make_node):
    studio = make_node(mini(memory_gb=64, cpu_cores="24 (16 performance and 8 efficiency)", chip="Apple M2 Ultra"))
    expected = capture(FIXTURES / "sysctl-n-hw.memsize-hw.ncpu-machdep.cpu.brand_string__inventory-go-test-macstudio__1.txt")
    assert studio.out("sysctl", "-n", "hw.memsize", "hw.ncpu", "machdep.cpu.brand_string") == expected
    studio.write_node(mini(memory_gb=36, cpu_cores="12 (6 performance and 6 efficiency)"))
    expected = capture(FIXTURES / "sysctl-n-hw.memsize-hw.ncpu-hw.physicalcpu-hw.logicalcpu__msbg-bench-notes__2.txt")
    assert studio.out("sysctl", "-n", "hw.memsize", "hw.ncpu", "hw.physicalcpu", "hw.logicalcpu") == expected
    rc, out, err = studio.run("sysctl", "-n", "hw.perflevel0.count", "hw.perflevel1.count")
    assert (rc, err) == (1, capture(FIXTURES / "sysctl-unknown-oid__msbg-bench-notes__1.txt"))


def test_sysctl_write_is_root_only_and_runtime(make_node):
    n = make_node()
    assert n.out("sysctl", "iogpu.wired_limit_mb") == "iogpu.wired_limit_mb: 0\n"
    assert n.run("sysctl", "-w", "iogpu.wired_limit_mb=14000", uid=501)[0] == 1
    expected = capture(FIXTURES / "sysctl-w-iogpu.wired_limit_mb__mlx-lm-notes__1.txt")
    assert n.out("sysctl", "iogpu.wired_limit_mb=14000") == expected
    assert n.out("sysctl", "-n", "iogpu.wired_limit_mb") == "14000\n"
    assert n.run("sysctl", "-w", "hw.model=x")[0] == 1
    n.reboot()
    assert n.out("sysctl", "-n", "iogpu.wired_limit_mb", "hw.optional.arm64", "sysctl.proc_translated",
                 "kern.osproductversion", "kern.osversion", "hw.model") == "0\n1\n0\n26.2\n25C56\nMac16,11\n"


def test_pmset_matches_captures(make_node):
    n = make_node(mini(model="macbook-pro-m1"))
    n.prefs("com.apple.PowerManagement", {"Battery Power": {"displaysleep": 0}, "AC Power": {"displaysleep": 0}})
    assert n.out("pmset", "-g", "custom") == capture(FIXTURES / "pmset-g-custom__amostras-swift-m1__2.txt")
    # The capture's sleep line carries a runtime annotation the sim has no cause for.
    expected = capture(FIXTURES / "pmset-g__amostras-swift-m1__2.txt").replace(" (sleep prevented by powerd, Claude, sharingd)", "")
    assert n.out("pmset", "-g") == expected


def test_pmset_settings_are_root_only_and_persistent(make_node):
    n = make_node()
    assert n.run("pmset", "-a", "sleep", "0", uid=501) == (1, "", "pmset must be run as root in order to modify any settings\n")
    n.out("pmset", "-a", "sleep", "0", "womp", "1", "autorestart", "1")
    n.reboot()
    custom = n.out("pmset", "-g", "custom")
    assert custom.startswith("AC Power:\n") and " sleep                0\n" in custom and " autorestart          1\n" in custom


def test_scutil_names(make_node):
    n = make_node()
    assert n.run("scutil", "--get", "HostName") == (1, "", capture(FIXTURES / "scutil-get-HostName__chinese-blog-hostname__1.txt"))
    assert n.out("scutil", "--get", "ComputerName") == "mini-1\n"
    assert n.run("scutil", "--set", "LocalHostName", "alibaba-inc", uid=501)[0] == 1
    n.out("scutil", "--set", "LocalHostName", "alibaba-inc")
    assert n.out("scutil", "--get", "LocalHostName") == capture(FIXTURES / "scutil-get-LocalHostName__chinese-blog-hostname__1.txt")
    assert n.out("hostname") == "alibaba-inc.local\n"


def test_systemsetup_xcode_select_softwareupdate(make_node):
    n = make_node()
    assert n.run("systemsetup", "-getremotelogin", uid=501) == (0, "You need administrator access to run this tool... exiting!\n", "")
    assert n.out("systemsetup", "-getremotelogin") == "Remote Login: On\n"
    assert n.out("xcode-select", "-p") == "/Library/Developer/CommandLineTools\n"
    n.write_node(mini(clt_installed=False))
    rc, _, err = n.run("xcode-select", "-p")
    assert rc == 2 and err.startswith("xcode-select: error: unable to get active developer directory.")
    # Nothing pending: the real capture's one stderr line and exit status 1.
    none = capture(FIXTURES / "softwareupdate-list-none__elliotweiser-ansible-osx-command-line-tools-issue-65__1.txt")
    assert n.run("softwareupdate", "--list") == (1, "", none)
    offered = {"label": "macOS Tahoe 26.5.2-25F84", "title": "macOS Tahoe 26.5.2", "version": "26.5.2",
               "build": "25F84", "size_kib": 2630358}
    n.write_node(mini(software_updates=[offered]))
    real = capture(FIXTURES / "softwareupdate-list__topgrade-rs-topgrade-issue-2123__1.txt")
    rc, listed, _ = n.run("softwareupdate", "--list")
    assert rc == 0 and real.endswith(listed)
    assert n.run("softwareupdate", "--install", "macOS Tahoe 26.5.2-25F84", "--agree-to-license", "--restart",
                 uid=501)[0] == 1
    rc, said, why = n.run("softwareupdate", "--install", "macOS Tahoe 26.5.2-25F84", "--agree-to-license", "--restart")
    assert rc == 1 and why == "failed to authorize for installation\n"


# --- launchctl and boot -----------------------------------------------------------------------

def test_launchctl_runs_runatload_jobs(make_node, tmp_path):
    n = make_node()
    marker = tmp_path / "ran"
    daemons = tmp_path / "Library/LaunchDaemons"
    daemons.mkdir(parents=True)
    plist = {"Label": "com.example.once", "RunAtLoad": True,
             "ProgramArguments": ["/bin/sh", "-c", f"echo $0 >> {marker}", "boot"]}
    (daemons / "com.example.once.plist").write_bytes(plistlib.dumps(plist))
    assert n.run("launchctl", "print", "system/com.example.once") == (
        113, "", 'Bad request.\nCould not find service "com.example.once" in domain for system\n')
    # launchctl starts jobs through dispatch.py's own path, as the shims do.
    n.monkeypatch.setattr(sys, "argv", [str(doubles.HERE / "dispatch.py")])
    n.reboot()
    deadline = time.time() + 5
    while "last exit code = 0" not in n.out("launchctl", "print", "system/com.example.once") and time.time() < deadline:
        time.sleep(0.05)
    assert marker.read_text() == "boot\n"
    printed = n.out("launchctl", "print", "system/com.example.once")
    assert printed.startswith("system/com.example.once = {\n\tactive count = 0\n\tpath = /Library/LaunchDaemons/com.example.once.plist\n")
    assert "\truns = 1\n" in printed and "\tlast exit code = 0\n" in printed
    assert n.out("launchctl", "list") == "PID\tStatus\tLabel\n-\t0\tcom.example.once\n"
    assert n.run("launchctl", "bootstrap", "system", "/Library/LaunchDaemons/com.example.once.plist")[0] == 5
    assert n.run("launchctl", "bootout", "system/com.example.once", uid=501)[0] == 1
    assert n.run("launchctl", "bootout", "system/com.example.once")[0] == 0
    assert n.run("launchctl", "bootout", "system/com.example.once") == (3, "", "Boot-out failed: 3: No such process\n")


def test_launchd_jobs_run_the_doubles_for_macos_system_tool_paths(make_node, tmp_path):
    # A LaunchDaemon names /usr/sbin/sysctl; the node's /usr/sbin is the Linux host's, so the
    # job must get the node's double from /usr/local/bin instead.
    n = make_node()
    marker = tmp_path / "ran"
    fake = tmp_path / "usr/local/bin/sysctl"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text(f"#!/bin/sh\n# stands in for the macsim shim\necho \"$@\" > {marker}\n")
    fake.chmod(0o755)
    daemons = tmp_path / "Library/LaunchDaemons"
    daemons.mkdir(parents=True)
    plist = {"Label": "com.example.wired", "RunAtLoad": True,
             "ProgramArguments": ["/usr/sbin/sysctl", "-w", "iogpu.wired_limit_mb=1000"]}
    (daemons / "com.example.wired.plist").write_bytes(plistlib.dumps(plist))
    n.monkeypatch.setattr(sys, "argv", [str(doubles.HERE / "dispatch.py")])
    assert n.run("launchctl", "bootstrap", "system", "/Library/LaunchDaemons/com.example.wired.plist")[0] == 0
    deadline = time.time() + 5
    while "last exit code" not in n.out("launchctl", "print", "system/com.example.wired") and time.time() < deadline:
        time.sleep(0.05)
    assert marker.read_text() == "-w iogpu.wired_limit_mb=1000\n"
    printed = n.out("launchctl", "print", "system/com.example.wired")
    assert "\tprogram = /usr/sbin/sysctl\n" in printed and "\tlast exit code = 0\n" in printed


# --- installation -----------------------------------------------------------------------------

def test_install_doubles_writes_shims_that_run_with_the_system_python(tmp_path, monkeypatch):
    fs = tmp_path / "fs"
    doubles.install_doubles(fs)
    assert sorted(p.name for p in (fs / "usr/local/bin").iterdir()) == sorted(doubles.TOOLS)
    assert oct((fs / doubles.BOOT).stat().st_mode & 0o777) == "0o700"
    shim = (fs / "usr/local/bin/sw_vers").read_text()
    assert shim == '#!/bin/sh\nexec /usr/bin/python3 -S /usr/local/libexec/macsim/lib/dispatch.py sw_vers "$@"\n'
    # Compiled at install: a user who cannot write __pycache__ never compiles a double at each call.
    cached = {p.name.split(".")[0] for p in (fs / doubles.LIBDIR / "macsim/__pycache__").iterdir()}
    assert cached >= {p.stem for p in (fs / doubles.LIBDIR / "macsim").glob("*.py")}
    node = fs / "usr/local/libexec/macsim/node.json"
    node.write_text(json.dumps(mini()))
    env = dict(os.environ, MACSIM_ROOT=str(fs))
    lib = fs / doubles.LIBDIR / "dispatch.py"
    proc = subprocess.run(["/usr/bin/python3", "-S", str(lib), "sw_vers", "-productVersion"], env=env,
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (0, "26.2\n")
    doubles.install_doubles(fs)  # refreshing an installed node works
