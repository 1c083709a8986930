"""The watch's judgement (mlx_fleet.watch) and outputs (mlx_fleet.watch_page) without Macs: one Mac's
record from real outputs, findings and the events that say each change once, the metrics as Prometheus
reads them, and the probe's bounded read under /bin/sh."""

import copy
import os
import signal
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import audit
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model import cluster as cluster_model
from mlx_fleet import watch
from mlx_fleet import watch_page
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port
from conftest import FIXTURE_DIR, load
from mlx_fleet import watch_cli
from mlx_fleet.verify import nodes
from captures import THUNDERBOLT_OUTPUTS

AB = Cable(Port("a", 1), Port("b", 2))  # the cable of cabled()

READS = {name: (rc, out) for name, (rc, out, _) in THUNDERBOLT_OUTPUTS.items()} | {
    "sw_vers": (0, load(FIXTURE_DIR / "sw_vers__sudo-is-man-pmset__1.txt")),
    "boottime": (0, load(FIXTURE_DIR / "sysctl-kern.boottime__chef-ohai-uptime__1.txt")),
    "pmset": (0, load(FIXTURE_DIR / "pmset-g-custom__go-pmset-table-test__1.txt")),
    "filevault": (0, load(FIXTURE_DIR / "fdesetup-status__macos-vm-guide__1.txt")),
}


def test_one_mac_from_real_outputs():
    mac = watch.observe(READS)
    assert mac["warnings"] == []
    assert mac["build"].startswith("14.2.1 (")
    assert mac["booted"] == 1232765114
    assert mac["rdma_enabled"] is True and mac["rdma_stale"] is False
    port = next(p for p in mac["ports"] if p["receptacle"] == 1)
    assert port["connected"] and port["speed_gbps"] == 80 and port["peers"][0]["direct"]
    assert isinstance(mac["power"]["sleep"], int)


def test_an_unknown_output_is_a_warning_quoting_it_not_a_failure():
    mac = watch.observe(READS | {"sw_vers": (0, "ProductName macOS\n"), "boottime": (0, "kern.boottime: 17\n")})
    assert mac["up"] and mac["build"] is None and mac["booted"] is None
    assert any("kern.boottime: 17" in w for w in mac["warnings"])
    assert mac["ports"]  # the rest is still read


def test_ibv_devinfo_that_times_out_is_stale_rdma():
    mac = watch.observe(READS | {"ibv_devinfo": (watch.TIMED_OUT, "")})
    assert mac["rdma_stale"] is True and mac["warnings"] == []
    found = watch.assess(watch.Baseline(["m1"]), {"m1": mac})
    assert found[("stale-rdma", "m1")].kind == "stale-rdma" and "reboot m1" in found[("stale-rdma", "m1")].fix


# --- a two-Mac cluster made from the sim's way of writing ports ------------------------------------------


def port(n, uuid, peer=None, speed=80, inet=()):
    return {"receptacle": n, "device": f"en{n + 1}", "domain_uuid": uuid, "connected": peer is not None,
            "speed_gbps": speed, "speed_is_max": peer is None,
            "peers": [{"domain_uuid": peer, "model": "Mac16,11", "name": "Mac mini", "direct": True}] if peer else [],
            "devices": [], "rdma_device": f"rdma_en{n + 1}", "rdma_state": "PORT_ACTIVE" if peer else "PORT_DOWN",
            "inet": list(inet)}


def mac(ports, **extra):
    return {"up": True, "error": "", "build": "26.2 (25C56)", "booted": 1000, "power": {"sleep": 0},
            "fingerprint": "abc", "bridge": {"device": "bridge0", "active": False, "members": [],
                                             "service_enabled": False},
            "rdma_enabled": True, "rdma_stale": False, "ports": ports, "warnings": []} | extra


BASE = watch.Baseline(["a", "b"], [cluster_model.link(Cable(Port("b", 2), Port("a", 1)), "192.168.0.0/30")], ["a", "b"],
                      {"a": "mini-m4-pro", "b": "mini-m4-pro"}, inventory="inv")


def cabled():
    return {"a": mac([port(1, "A1", "B2", inet=["192.168.0.1/30"])]),
            "b": mac([port(2, "B2", "A1", inet=["192.168.0.2/30"])])}


def test_a_healthy_cluster_has_no_findings():
    assert watch.assess(BASE, cabled()) == {}


def test_a_pulled_cable_names_both_ends_once_and_clears_once():
    pulled = cabled()
    pulled["a"]["ports"][0] = port(1, "A1", inet=["192.168.0.1/30"])
    pulled["b"]["ports"][0] = port(2, "B2", inet=["192.168.0.2/30"])
    found = watch.assess(BASE, pulled)
    assert list(found) == [("cable", AB)]
    out = found[("cable", AB)]
    assert (out.kind, out.hosts, out.ports, out.cable) == ("cable", ("a", "b"), (Port("a", 1), Port("b", 2)), Cable(Port("a", 1), Port("b", 2)))
    assert out.found == "a Thunderbolt 1 sees no link, b Thunderbolt 2 sees no link"
    first = watch.events({}, found)
    assert [(e["event"], e["state"], e["cable"]) for e in first] == [("cable", "new", "a:1 -- b:2")]
    assert watch.events(found, watch.assess(BASE, pulled)) == []  # the next round: nothing new
    back = watch.events(found, watch.assess(BASE, cabled()))
    assert [(e["state"], e["event"], e["cable"]) for e in back] == [("cleared", "cable", "a:1 -- b:2")]


def test_a_mac_down_hides_its_cables_and_says_itself():
    macs = cabled() | {"b": watch.unreachable("ssh: connect to host b port 22: Connection timed out")}
    found = watch.assess(BASE, macs)
    assert list(found) == [("unreachable", "b")]
    assert found[("unreachable", "b")].found == "ssh: connect to host b port 22: Connection timed out"


def test_bridge_address_rdma_speed_sleep_and_builds():
    macs = cabled()
    macs["a"]["bridge"] = {"device": "bridge0", "active": True, "members": ["en2"], "service_enabled": True}
    macs["b"]["ports"][0]["inet"] = []
    macs["b"]["rdma_enabled"] = False
    macs["a"]["power"] = {"sleep": 10}
    macs["b"]["build"] = "26.2 (25C57)"
    for p, peer_port in ((macs["a"]["ports"][0], None), (macs["b"]["ports"][0], None)):
        p["speed_gbps"] = 40
    found = watch.assess(BASE, macs)
    assert sorted(f.kind for f in found.values()) == ["bridge", "no-ipv4", "os-mismatch", "rdma-off", "sleep", "slow"]
    address = found[("no-ipv4", Port("b", 2))]
    assert (address.hosts, address.ports, address.cable, address.expected) == (
        ("b",), (Port("b", 2),), Cable(Port("a", 1), Port("b", 2)), "192.168.0.2/30")


def test_a_reboot_and_an_update_are_said_once():
    before = cabled()
    after = copy.deepcopy(before)
    after["b"]["booted"] = 5000
    after["b"]["build"] = "26.3 (25D20)"
    after["b"]["rdma_enabled"] = False  # as an update leaves it
    said = watch.changes(BASE, before, after)
    assert [(e["event"], e["macs"]) for e in said] == [("reboot", ["b"]), ("build", ["b"])]  # b: rdma-off finding
    assert [e["event"] for e in watch.changes(watch.Baseline(["a", "b"]), before, after)] == ["rdma", "reboot", "build"]
    assert watch.changes(BASE, after, copy.deepcopy(after)) == []


def test_metrics_parse_with_prometheus_text_parser():
    pulled = cabled()
    pulled["a"]["ports"][0] = port(1, "A1")
    macs = pulled | {"b": watch.unreachable("x")}
    findings = watch.assess(BASE, macs)
    text = watch_page.metrics(BASE, macs, watch.links_found(BASE.hosts, macs), findings, 1796137660.5)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("mlx_fleet_mac_up", (("mac", "a"),))] == 1
    assert samples[("mlx_fleet_mac_up", (("mac", "b"),))] == 0
    assert samples[("mlx_fleet_link_up", (("cable", "a:1 -- b:2"),))] == 0
    assert samples[("mlx_fleet_findings", ())] == len(findings) == 1
    assert samples[("mlx_fleet_watch_last_round_timestamp_seconds", ())] == 1796137660.5


def sh(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=30)


def test_the_bounded_read_stops_a_hang_and_keeps_a_quick_answer():
    # Unbounded, the sleep would outlast sh()'s own 30 s limit and fail the test.
    hung = sh(nodes._bounded("sleep 300", 0.4) + "; echo status $?")
    assert hung.stdout == "status 124\n"
    quick = sh(nodes._bounded("sh -c 'echo hca_id: x; exit 3'", 2) + "; echo status $?")
    assert quick.stdout == "hca_id: x\nstatus 3\n"


@pytest.mark.parametrize("tail", ["}", "}\n"])
def test_sections_split_an_output_without_its_final_newline(tail):
    text = f"{nodes._MARK} thunderbolt\n{{\"a\": 1{tail}{nodes._MARK} end 0\n{nodes._MARK} rdma_ctl\nenabled\n{nodes._MARK} end 0\n"
    found = nodes._sections(text)
    assert found["thunderbolt"] == (0, '{"a": 1' + tail) and found["rdma_ctl"] == (0, "enabled\n")


def test_a_mac_whose_ports_cannot_be_read_is_not_said_to_have_lost_its_cables():
    macs = cabled()
    macs["b"] = watch.observe(READS | {"thunderbolt": (0, "{}")})  # an output the parser does not know
    assert macs["b"]["up"] and macs["b"]["bridge"] is None
    assert any(w.startswith("Thunderbolt: cannot be read") for w in macs["b"]["warnings"])
    assert not [f for f in watch.assess(BASE, macs).values() if f.kind == "cable"]


def test_a_cabled_rdma_port_without_its_ipv4_mapped_gid_is_said_once():
    macs = cabled()
    for host in macs:
        p = macs[host]["ports"][0]
        p["rdma_gids"] = ["fe80::1"] + [f"::ffff:{a.split('/')[0]}" for a in p["inet"]]
    assert watch.assess(BASE, macs) == {}
    macs["b"]["ports"][0]["rdma_gids"] = ["fe80::1"]  # a stale table: the address is there, its GID is not
    found = watch.assess(BASE, macs)
    assert list(found) == [("rdma-gid", Port("b", 2))]
    gid = found[("rdma-gid", Port("b", 2))]
    assert (gid.kind, gid.hosts, gid.ports, gid.cable) == ("rdma-gid", ("b",), (Port("b", 2),), Cable(Port("a", 1), Port("b", 2)))
    macs["b"]["ports"][0]["rdma_gids"] = None  # not listed (ibv_devinfo without -v): nothing said
    assert watch.assess(BASE, macs) == {}


def test_a_finding_carries_its_cable_as_ends_and_renders_the_same_line():
    pulled = cabled()
    pulled["a"]["ports"][0] = port(1, "A1", inet=["192.168.0.1/30"])
    pulled["b"]["ports"][0] = port(2, "B2", inet=["192.168.0.2/30"])
    found = watch.assess(BASE, pulled)[("cable", AB)]
    assert found.cable == AB == Cable(*found.ports)
    assert found.fix.endswith("if it was moved on purpose: mlx-fleet converge -i inv")
    event = watch.events({}, {("cable", AB): found})[0]
    assert (event["cable"], event["ports"]) == ("a:1 -- b:2", [["a", 1], ["b", 2]])
    # status.json keeps the text for a person and the ends for programs; read back, it is the same finding.
    data = watch.findings_data({("cable", AB): found})
    assert data["cable a:1 -- b:2"]["cable"] == "a:1 -- b:2" and data["cable a:1 -- b:2"]["ports"] == [["a", 1], ["b", 2]]
    assert data["cable a:1 -- b:2"]["cable_ends"] == [["a", 1], ["b", 2]]
    assert watch.findings_from(data) == {("cable", AB): found}
    # The picture draws it from the ends, not from the text.
    dot = watch_page.picture(BASE, [], {("cable", AB): found}, "t")
    assert '"a" -- "b" [label="OUT: TB1 -- TB2", style=dashed, color=red, fontcolor=red];' in dot


def test_a_cable_found_that_the_last_converge_did_not_configure_is_extra():
    macs = cabled()
    macs["a"]["ports"].append(port(2, "A2", "B1"))
    macs["b"]["ports"].append(port(1, "B1", "A2"))
    found = watch.assess(BASE, macs)
    assert list(found) == [("extra", Cable(Port("a", 2), Port("b", 1)))]
    assert found[("extra", Cable(Port("a", 2), Port("b", 1)))].cable == Cable(Port("a", 2), Port("b", 1)) == Cable(*found[("extra", Cable(Port("a", 2), Port("b", 1)))].ports)
    assert sorted(watch_page.cables(BASE, watch.links_found(BASE.hosts, macs))) == ["a:1 -- b:2", "a:2 -- b:1"]


def test_the_watchs_hints_name_the_clis_commands_with_the_inventory():
    macs = cabled()
    for host in macs:
        macs[host]["ports"][0]["rdma_gids"] = ["fe80::1"]
    found = watch.assess(BASE, macs)
    assert found[("rdma-gid", Port("a", 1))].fix == ("give the port its IPv4 address back: mlx-fleet converge -i inv "
                                         "(ibv_devinfo -v then lists ::ffff:<its address>)")
    after = copy.deepcopy(cabled())
    after["b"]["build"] = "26.3 (25D20)"
    build = next(e for e in watch.changes(BASE, cabled(), after) if e["event"] == "build")
    assert build["fix"] == "check RDMA and the bridge (updates switch them): mlx-fleet audit -i inv"


def test_a_ctrl_c_while_a_round_is_written_waits_for_its_files_then_stops_the_watch():
    written = []
    with pytest.raises(KeyboardInterrupt):
        with watch_cli.interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            written.append("status.json")
            os.kill(os.getpid(), signal.SIGTERM)
            written.append("metrics.prom")
    assert written == ["status.json", "metrics.prom"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are given back


def test_a_round_written_without_a_signal_goes_on():
    with watch_cli.interrupt_after():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_active_bridge_without_members_is_drift_for_the_watch_as_for_the_audit():
    macs = cabled()
    macs["a"]["bridge"] = {"device": "bridge0", "active": True, "members": [], "service_enabled": False}
    found = watch.assess(BASE, macs)
    assert [(f.kind, f.hosts) for f in found.values()] == [("bridge", ("a",))]
    assert not audit.bridge_check("a", macs["a"]["bridge"], "disabled").ok
