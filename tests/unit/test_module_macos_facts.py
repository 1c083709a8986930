"""macos_facts' entry point: main() reading a Mac from real outputs (tests/fixtures/macos)."""

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS
from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_facts
from module_runner import Commands, fixture, run_module

# ifconfig as a Mac whose management cable is on Thunderbolt 1 prints it (TN3205's en2 and bridge0).
IFCONFIG_TB = fixture("ifconfig-en2__apple-tn3205__1.txt") + fixture("ifconfig-bridge0__apple-tn3205__1.txt")


def outputs(**overrides):
    """{READS name: (rc, out, err)} of a Mac, from real captures."""
    answers = {
        "sw_vers": (0, fixture("sw_vers__sudo-is-man-pmset__1.txt"), ""),
        # A real 'name: value' listing; the keys it lacks come back as unknown oids on stderr.
        "sysctl": (1, "hw.optional.arm64: 1\nhw.memsize: 137438953472\niogpu.wired_limit_mb: 14000\n",
                   "sysctl: unknown oid 'kern.osproductversion'\n"),
        "hardware": (0, fixture("system_profiler-SPHardwareDataType-json__mondoo-go-test__1.txt"), ""),
        "hardware_ports": (0, fixture("networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt"), ""),
        "ifconfig": (0, fixture("ifconfig__bmidgley-citizen-scientist__1.txt"), ""),
        "groups": (0, "staff everyone localaccounts _appserverusr admin _appserveradm\n", ""),
        "sudo": (1, "", "sudo: a password is required\n"),
        "xcode_select": (0, "/Library/Developer/CommandLineTools\n", ""),
    }
    answers.update(overrides)
    return Commands({READS[name]: answer for name, answer in answers.items()})


def facts(monkeypatch, ssh_connection, check_mode=False, **overrides):
    if ssh_connection is None:
        monkeypatch.delenv("SSH_CONNECTION", raising=False)
    else:
        monkeypatch.setenv("SSH_CONNECTION", ssh_connection)
    commands = outputs(**overrides)
    result = run_module(macos_facts.main, {}, commands, check_mode=check_mode)
    assert not result.get("failed"), result["msg"]
    assert sorted(set(commands.calls)) == sorted(READS[name] for name in node_facts.MACOS_READS)
    return result


def test_a_mac_read_from_real_outputs(monkeypatch):
    result = facts(monkeypatch, "192.168.64.7 50122 192.168.64.1 22")
    assert result["changed"] is False
    mac = result["ansible_facts"]["mlx_fleet_macos"]
    assert (mac["product_version"], mac["build_version"]) == ("14.2.1", "23C71")
    assert (mac["model_identifier"], mac["chip"], mac["memory_mb"]) == ("Mac16,5", "Apple M4 Max", 48 * 1024)
    assert mac["apple_silicon"] is True
    assert mac["sudo"] == "password"  # an administrator whose sudo asks for a password
    assert mac["command_line_tools"] is True and mac["wired_limit_mb"] == 14000
    # The connection arrives on Internet Sharing's bridge100, which is no hardware port.
    assert (mac["management_interface"], mac["management_hardware_port"], mac["management_address"]) == (
        "bridge100", None, "192.168.64.1")


def test_check_mode_reads_the_same(monkeypatch):
    assert facts(monkeypatch, "192.168.64.7 50122 192.168.64.1 22", check_mode=True) == facts(
        monkeypatch, "192.168.64.7 50122 192.168.64.1 22")


@pytest.mark.parametrize("ssh_connection, interface, hardware_port, address", [
    # Managed over a Thunderbolt cable: the controller must not reconfigure that port.
    ("169.254.10.20 51514 169.254.205.255 22", "en2", "Thunderbolt 1", "169.254.205.255"),
    # An IPv6 link-local session names its scope; the address matches without it.
    ("fe80::aa:1%en2 51514 fe80::1021:1bac:fe1:b5e3%en2 22", "en2", "Thunderbolt 1", "fe80::1021:1bac:fe1:b5e3%en2"),
    ("127.0.0.1 40022 127.0.0.1 22", None, None, "127.0.0.1"),  # TN3205's listing shows no lo0
])
def test_the_management_interface_is_the_one_the_connection_arrives_on(
        monkeypatch, ssh_connection, interface, hardware_port, address):
    mac = facts(monkeypatch, ssh_connection, ifconfig=(0, IFCONFIG_TB, ""))["ansible_facts"]["mlx_fleet_macos"]
    assert (mac["management_interface"], mac["management_hardware_port"], mac["management_address"]) == (
        interface, hardware_port, address)


def test_without_an_ssh_session_the_management_interface_is_unknown(monkeypatch):
    result = facts(monkeypatch, None)
    mac = result["ansible_facts"]["mlx_fleet_macos"]
    assert (mac["management_interface"], mac["management_hardware_port"], mac["management_address"]) == (
        None, None, None)
    assert result["warnings"] == ["SSH_CONNECTION is not set (not an SSH session, or become dropped it), so the "
                                  "management interface is unknown; run macos_facts without become"]


@pytest.mark.parametrize(("override", "key", "value"), [
    ({"sudo": (0, "", "")}, "sudo", "passwordless"),
    ({"groups": (0, "staff everyone\n", "")}, "sudo", "none"),
    ({"sysctl": (1, "", "sysctl: unknown oid 'hw.optional.arm64'\n")}, "apple_silicon", False),
    ({"xcode_select": (2, "", "xcode-select: error: unable to get active developer directory\n")},
     "command_line_tools", False),
])
def test_facts_variants(monkeypatch, override, key, value):
    assert facts(monkeypatch, "10.0.0.9 50000 192.168.64.1 22", **override)["ansible_facts"]["mlx_fleet_macos"][
        key] == value


@pytest.mark.parametrize("override, message", [
    ({"sw_vers": (0, "no such format\n", "")}, "unexpected output: sw_vers: no ProductVersion/BuildVersion"),
    ({"hardware_ports": (1, "", "networksetup: not permitted\n")},
     "networksetup -listallhardwareports failed (exit 1): networksetup: not permitted"),
])
def test_a_failed_or_unknown_output_names_the_command(monkeypatch, override, message):
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.9 50000 192.168.64.1 22")
    result = run_module(macos_facts.main, {}, outputs(**override))
    assert result["failed"] and result["msg"] == message


def test_a_malformed_ssh_connection_fails(monkeypatch):
    monkeypatch.setenv("SSH_CONNECTION", "192.168.64.1")
    result = run_module(macos_facts.main, {}, outputs())
    assert result["failed"] and result["msg"].startswith("unexpected output: SSH_CONNECTION: expected")


def test_it_takes_no_options(monkeypatch):
    result = run_module(macos_facts.main, {"gather": "all"}, outputs())
    assert result["failed"] and "Unsupported parameters" in result["msg"] and "gather" in result["msg"]


def test_a_line_of_unknown_wording_is_left_out_with_a_warning_not_a_failed_mac(monkeypatch):
    # A macOS update that adds a line to a listing: the Mac is still read, the line quoted in a warning.
    ports = fixture("networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt")
    result = facts(monkeypatch, "192.168.64.7 50122 192.168.64.1 22",
                   hardware_ports=(0, "Hardware Port Group: Thunderbolt\n" + ports, ""),
                   sw_vers=(0, fixture("sw_vers__sudo-is-man-pmset__1.txt") + "Rapid Security Response\n", ""))
    mac = result["ansible_facts"]["mlx_fleet_macos"]
    assert (mac["product_version"], mac["model_identifier"]) == ("14.2.1", "Mac16,5")
    assert result["warnings"] == [
        "sw_vers: left out a line of unknown wording: 'Rapid Security Response'",
        "networksetup -listallhardwareports: left out a line of unknown wording: 'Hardware Port Group: Thunderbolt'"]


def test_hostfile_dir_adds_the_digests_of_the_hostfiles_and_the_hold_in_the_same_call(monkeypatch, tmp_path):
    import hashlib

    monkeypatch.setenv("SSH_CONNECTION", "192.168.64.7 50122 192.168.64.1 22")
    (tmp_path / "hostfile.json").write_text('{"backend": "jaccl"}')
    commands = outputs()
    result = run_module(macos_facts.main, {"hostfile_dir": str(tmp_path)}, commands)
    assert result["ansible_facts"]["mlx_fleet_hostfiles"] == {
        "hostfile.json": hashlib.sha256(b'{"backend": "jaccl"}').hexdigest(), "hostfile-ring.json": None,
        "hostfile.held": None}
    assert sorted(set(commands.calls)) == sorted(READS[name] for name in node_facts.MACOS_READS)  # no other tool
    assert "mlx_fleet_hostfiles" not in facts(monkeypatch, "192.168.64.7 50122 192.168.64.1 22")["ansible_facts"]


NODE = {"power_settings": {"sleep": 0, "womp": 1}, "computer_name": "studio-1", "wired_limit_mb": 0}


def node_compared(monkeypatch, sleep, **options):
    """mlx_fleet_node of a Mac whose pmset says SLEEP, read with the node option (macos_node's options)."""
    monkeypatch.setenv("SSH_CONNECTION", "192.168.64.7 50122 192.168.64.1 22")
    commands = outputs(pmset=(0, f"AC Power:\n sleep                {sleep}\n womp                 1\n", ""),
                       computer_name=(0, "studio-1\n", ""))
    result = run_module(macos_facts.main, {"node": dict(NODE, **options)}, commands)
    assert not result.get("failed"), result["msg"]
    return result["ansible_facts"]["mlx_fleet_node"]


def test_the_preflight_compares_the_node_settings_with_macos_nodes_own_plan(monkeypatch):
    assert node_compared(monkeypatch, 0) == {"differs": False, "changes": {"power": {}, "names": {}}}
    assert node_compared(monkeypatch, 10) == {"differs": True, "changes": {"power": {"sleep": 0}, "names": {}}}
    assert node_compared(monkeypatch, 0, computer_name="studio-9") == {
        "differs": True, "changes": {"power": {}, "names": {"ComputerName": "studio-9"}}}
    # Options macos_node would refuse: it runs, and says why.
    assert node_compared(monkeypatch, 0, wired_limit_label="no spaces")["differs"] is True
    assert node_compared(monkeypatch, 0, wired_limit_mb="many")["differs"] is True


def test_models_adds_what_the_mac_holds_of_them_sizes_only_in_the_same_call(monkeypatch, tmp_path):
    monkeypatch.setenv("SSH_CONNECTION", "192.168.64.7 50122 192.168.64.1 22")
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "models" / "tiny" / "config.json").write_text("{}")
    manifest = {"name": "tiny", "source": "path", "files": [
        {"path": "config.json", "size": 2, "sha256": "0" * 64}, {"path": "model.safetensors", "size": 9, "sha256": "1" * 64}]}
    pinned = {"manifests": [manifest], "not_pinned": [], "hf_cache": str(tmp_path / "hf"),
              "models_dir": str(tmp_path / "models"), "changed": False}  # models_manifest's result, as registered
    commands = outputs()
    result = run_module(macos_facts.main, {"models": pinned}, commands)
    held = result["ansible_facts"]["mlx_fleet_model_files"]
    assert held["deep"] is False  # sizes only: a wrong hash of config.json goes unseen here
    assert [(f["path"], f["state"]) for f in held["models"][0]["files"]] == [
        ("config.json", "ok"), ("model.safetensors", "missing")]
    assert sorted(set(commands.calls)) == sorted(READS[name] for name in node_facts.MACOS_READS)  # no other tool
    assert "mlx_fleet_model_files" not in facts(monkeypatch, "192.168.64.7 50122 192.168.64.1 22")["ansible_facts"]
