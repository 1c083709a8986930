"""networksetup services in the doubles against real iproute2 (the netns fixture: root and iproute2 needed)."""


def test_an_additional_route_off_the_subnet_is_skipped_not_fatal(netns):
    # configd stores the route and IPMonitor skips it while its gateway is unreachable; the
    # networksetup call that re-applies the service (here: a new address) still succeeds.
    def ok(*argv):
        result = netns(*argv)
        assert result.returncode == 0, result.stderr
        return result.stdout

    ok("boot")
    ok("networksetup", "-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1")
    ok("networksetup", "-setmanual", "Thunderbolt 1", "10.9.0.1", "255.255.255.0")
    ok("networksetup", "-setadditionalroutes", "Thunderbolt 1", "10.10.0.0", "255.255.0.0", "10.9.0.254")
    assert "    gateway: 10.9.0.254\n  interface: en2\n" in ok("route", "-n", "get", "10.10.1.1")
    ok("networksetup", "-setmanual", "Thunderbolt 1", "192.168.80.1", "255.255.255.252")
    assert "\tinet 192.168.80.1 netmask 0xfffffffc broadcast 192.168.80.3\n" in ok("ifconfig", "en2")
    assert "interface: en2" not in ok("route", "-n", "get", "10.10.1.1")
    assert ok("networksetup", "-getadditionalroutes", "Thunderbolt 1") == "10.10.0.0 255.255.0.0 10.9.0.254\n"
    ok("networksetup", "-setnetworkserviceenabled", "Thunderbolt 1", "off")
    ok("networksetup", "-setnetworkserviceenabled", "Thunderbolt 1", "on")
    ok("networksetup", "-setmanual", "Thunderbolt 1", "10.9.0.1", "255.255.255.0")
    assert "    gateway: 10.9.0.254\n  interface: en2\n" in ok("route", "-n", "get", "10.10.1.1")
