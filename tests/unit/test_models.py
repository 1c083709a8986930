"""plugin_utils.base.mac_models: the catalogue (every Apple Silicon Mac with Thunderbolt), its look-ups, what a Mac's own
facts tell when the catalogue cannot place it, and a declared key checked against the Mac; and rdma's
judgment when rdma_ctl or ibv_devices print a wording no real Mac has shown."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_parsers import parse_thunderbolt_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import mac_models as models
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from module_runner import fixture

M5_MAX_TB = parse_thunderbolt_json(fixture("system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt"))


def macos(identifier, name="Mac", chip="", version="26.2"):
    return {"model_identifier": identifier, "model_name": name, "chip": chip, "product_version": version,
            "build_version": "25C56", "serial_number": "S1"}


def idle_ports(rating, n=3, linked=()):
    """mlx_fleet_thunderbolt ports as system_profiler shows them: idle at their rating, or linked at a speed."""
    return [{"receptacle": i, "device": f"en{i}", "domain_uuid": f"UUID-{i}", "speed_gbps": dict(linked).get(i, rating),
             "speed_is_max": i not in dict(linked), "peers": [], "rdma_device": None, "rdma_state": None}
            for i in range(1, n + 1)]


def test_every_family_and_chip_generation_is_in_the_catalogue_with_its_source():
    families = {(m.model_name, m.chip.split()[1]) for m in MODELS.values()}
    for name in ("Mac mini", "Mac Studio", "MacBook Pro", "iMac"):
        assert {chip for n, chip in families if n == name} >= ({"M1", "M3", "M4"} if name == "iMac" else
                                                               {"M1", "M2", "M4"})
    assert ("Mac Pro", "M2") in families and ("MacBook Pro", "M5") in families and ("MacBook Air", "M4") in families
    for m in MODELS.values():
        assert m.source and m.source_url.startswith("https://support.apple.com/"), m.key
        assert m.port_count >= 2 and m.tb_generation in (4, 5), m.key
        # Only the M4 Pro/Max, M5 Pro/Max and M3 Ultra generation has Thunderbolt 5.
        assert (m.tb_generation == 5) == (m.chip.split()[-1] in ("Pro", "Max", "Ultra")
                                          and m.chip.split()[1] in ("M4", "M5", "M3") and
                                          (m.chip != "Apple M3 Pro" and m.chip != "Apple M3 Max")), m.key
    ids = [i for m in MODELS.values() for i in m.model_ids]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("identifier, key", [
    ("Mac15,14", "studio-m3-ultra"), ("Mac16,9", "studio-m4-max"), ("Mac14,14", "studio-m2-ultra"),
    ("Mac14,13", "studio-m2-max"), ("Mac13,2", "studio-m1-ultra"), ("Mac17,7", "macbook-pro-m5-max"),
    ("Mac17,6", "macbook-pro-m5-max"), ("Mac16,11", "mini-m4-pro"), ("Mac16,10", "mini-m4"),
    ("Mac16,5", "macbook-pro-m4-max"), ("Mac14,8", "mac-pro-m2-ultra"), ("Mac99,1", None), (None, None),
])
def test_model_identifiers_map_to_keys(identifier, key):
    found = models.by_identifier(identifier)
    assert (found.key if found else None) == key


def test_port_positions_and_quirks():
    assert MODELS["studio-m4-max"].thunderbolt_devices == [(1, "en2"), (2, "en3"), (3, "en4"), (4, "en5")]
    assert MODELS["studio-m3-ultra"].thunderbolt_devices == [(n, f"en{n + 1}") for n in range(1, 7)]
    assert MODELS["macbook-pro-m5-max"].thunderbolt_devices == [(1, "en1"), (2, "en2"), (3, "en3")]
    assert MODELS["studio-m4-max"].rdma_broken_ports == (1,) and MODELS["studio-m2-ultra"].rdma_broken_ports == ()
    assert MODELS["studio-m2-ultra"].tb_generation == 4 and MODELS["macbook-pro-m5-max"].tb_generation == 5


def test_a_mac_is_identified_by_identifier_else_by_name_and_chip():
    assert models.identify(macos("Mac16,9")).key == "studio-m4-max"
    # An identifier the catalogue has not recorded, a name and chip it has: that model.
    assert models.identify(macos("Mac17,9", "MacBook Pro", "Apple M5 Pro")).key == "macbook-pro-m5-pro"
    assert models.identify(macos("Mac18,1", "Mac Studio", "Apple M5 Ultra")) is None
    assert models.model_for("mini-m4", macos("Mac16,9")).key == "mini-m4"  # the declared key wins
    assert models.model_for("no-such-key", macos("Mac16,9")).key == "studio-m4-max"
    assert models.resolve_keys(["a", "b", "c"], {"a": "mini-m4-pro"},
                               {"b": macos("Mac14,14"), "c": macos("Mac18,1")}) == {"a": "mini-m4-pro",
                                                                                   "b": "studio-m2-ultra"}


def test_the_generation_comes_from_the_macs_own_ports():
    # The M5 Max capture: two idle ports "Up to 120 Gb/s", one 80 Gb/s link.
    assert [(p["speed_gbps"], p["speed_is_max"]) for p in M5_MAX_TB] == [(80, False), (120, True), (120, True)]
    assert models.generation_from_facts({"ports": M5_MAX_TB}) == 5
    assert models.generation_from_facts({"ports": [M5_MAX_TB[0]]}) == 5  # an 80 Gb/s link alone
    assert models.generation_from_facts({"ports": idle_ports(40)}) == 4  # "Up to 40 Gb/s"
    assert models.generation_from_facts({"ports": idle_ports(40, linked=[(1, 40), (2, 40), (3, 40)])}) is None
    assert models.generation_from_facts({"ports": []}) is None


def test_a_declared_key_is_checked_against_the_mac():
    assert models.mismatch("s1", "studio-m4-max", macos("Mac16,9", "Mac Studio", "Apple M4 Max")) is None
    assert models.mismatch("m1", "macbook-pro-m5-max", macos("Mac17,6", "MacBook Pro", "Apple M5 Max")) is None
    # One line: the Mac, both models, and the key that fits it.
    said = models.mismatch("s2", "studio-m4-max", macos("Mac14,14", "Mac Studio", "Apple M2 Ultra"))
    assert "\n" not in said and said.startswith("s2: ")
    assert all(value in said for value in ("studio-m4-max", "Mac14,14", "mlx_fleet_model: studio-m2-ultra"))
    # A Mac the catalogue cannot place: no key to suggest, the variable to take out.
    said = models.mismatch("x", "mini-m4", macos("Mac18,1", "Mac Studio", "Apple M5 Ultra"))
    assert "remove mlx_fleet_model" in said and "mlx_fleet_model:" not in said
    # A newer identifier with the declared model's name and chip is not a contradiction.
    assert models.mismatch("m2", "macbook-pro-m5-pro", macos("Mac17,9", "MacBook Pro", "Apple M5 Pro")) is None


def tb_facts(rating, *, status="enabled", enabled=True, devices=("rdma_en1", "rdma_en2", "rdma_en3")):
    return {"ports": idle_ports(rating), "bridge": {}, "rdma_enabled": enabled, "rdma_status": status,
            "rdma_devices": list(devices)}


def test_an_undeclared_thunderbolt_4_mac_is_not_capable_from_its_model_or_its_ports():
    studio = rdma.classify_node("s2", macos("Mac14,14", "Mac Studio", "Apple M2 Ultra"), tb_facts(40))
    assert (studio.status, studio.reason, studio.model) == (rdma.NOT_CAPABLE, "thunderbolt 4", "studio-m2-ultra")
    unknown = rdma.classify_node("x", macos("Mac18,1", "Mac Studio", "Apple M5 Ultra"), tb_facts(40))
    assert (unknown.status, unknown.reason, unknown.model) == (rdma.NOT_CAPABLE, "thunderbolt 4", None)
    newer = rdma.classify_node("y", macos("Mac18,1", "Mac Studio", "Apple M5 Ultra"), tb_facts(120))
    assert newer.status == rdma.READY


def test_rdma_ctl_unknown_with_rdma_devices_is_judged_by_them_and_warned():
    facts = dict(tb_facts(120, status="unknown"), rdma_unread=[{"command": "rdma_ctl status", "output": "RDMA: on"}])
    node = rdma.classify_node("m1", macos("Mac17,7", "MacBook Pro", "Apple M5 Max"), facts)
    assert (node.status, node.rdma_status) == (rdma.READY, "unknown")
    assert node.rdma_devices == ["rdma_en1", "rdma_en2", "rdma_en3"]
    [warning] = rdma.unread_warnings({"m1": node})  # the Mac, the command, its output quoted, the devices
    assert warning.startswith("m1: rdma_ctl status ") and repr("RDMA: on") in warning
    assert ", ".join(node.rdma_devices) in warning


def test_ibv_devices_unknown_is_warned_with_the_devices_found_in_it():
    facts = dict(tb_facts(120, status="unknown", enabled=False, devices=()),
                 rdma_unread=[{"command": "ibv_devices", "output": "No IB devices found"}])
    node = rdma.classify_node("m1", macos("Mac17,7", "MacBook Pro", "Apple M5 Max"), facts)
    assert node.status == rdma.NEEDS_RECOVERY
    assert (node.rdma_status, node.rdma_devices) == ("unknown", [])
    [warning] = rdma.unread_warnings({"m1": node})
    assert warning.startswith("m1: ibv_devices ") and repr(facts["rdma_unread"][0]["output"]) in warning


def test_rdma_ctl_unknown_without_rdma_devices_needs_the_recovery_step_saying_why():
    node = rdma.classify_node("m1", macos("Mac17,7", "MacBook Pro", "Apple M5 Max"),
                              tb_facts(120, status="unknown", enabled=False, devices=()))
    assert node.status == rdma.NEEDS_RECOVERY
    # Why, as data: the tools' wording unknown, no rdma_* device, on this model and build.
    assert (node.rdma_status, node.rdma_devices, node.model, node.build_version) == (
        "unknown", [], "macbook-pro-m5-max", "25C56")
    assert node.message.startswith("m1: ") and node.found in node.message and node.fix in node.message
    carriers = rdma.carriers({"m1": node}, [])
    assert list(carriers.refusals) == ["m1"] and "unknown" in carriers.refusals["m1"]


def test_docs_models_lists_the_catalogue():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| `")]
    assert [r[0].strip("`") for r in rows] == list(MODELS)
    for key, name, chip, ids, generation, ports, *rest in rows:
        m = MODELS[key.strip("`")]
        assert (name, chip, generation, ports.split()[0]) == (m.model_name, m.chip, str(m.tb_generation),
                                                             str(m.port_count)), key
        assert ids == (", ".join(m.model_ids) or "(not listed yet)") and m.source_url in rest[-1], key


# Port count and Thunderbolt generation per key, as the pages in docs/models.md give them; a change to the catalogue
# that no source backs fails here.
CHECKED_PORTS = {
    "studio-m3-ultra": (6, 5), "studio-m4-max": (4, 5), "studio-m2-ultra": (6, 4), "studio-m2-max": (4, 4),
    "studio-m1-ultra": (6, 4), "studio-m1-max": (4, 4), "mini-m4-pro": (3, 5), "mini-m4": (3, 4),
    "mini-m2-pro": (4, 4), "mini-m2": (2, 4), "mini-m1": (2, 4), "macbook-pro-m5-max": (3, 5),
    "macbook-pro-m5-pro": (3, 5), "macbook-pro-m5": (3, 4), "macbook-pro-m4-max": (3, 5),
    "macbook-pro-m4-pro": (3, 5), "macbook-pro-m4": (3, 4), "macbook-pro-m3-max": (3, 4),
    "macbook-pro-m3-pro": (3, 4), "macbook-pro-m3": (2, 4), "macbook-pro-m2-max": (3, 4),
    "macbook-pro-m2-pro": (3, 4), "macbook-pro-m2": (2, 4), "macbook-pro-m1-max": (3, 4),
    "macbook-pro-m1-pro": (3, 4), "macbook-pro-m1": (2, 4), "macbook-air-m4": (2, 4), "macbook-air-m3": (2, 4),
    "macbook-air-m2": (2, 4), "macbook-air-m1": (2, 4), "imac-m4": (4, 4), "imac-m4-two-port": (2, 4),
    "imac-m3": (2, 4), "imac-m1": (2, 4), "mac-pro-m2-ultra": (8, 4),
}


def test_port_counts_and_generations_are_the_checked_ones():
    assert {k: (m.port_count, m.tb_generation) for k, m in MODELS.items()} == CHECKED_PORTS


@pytest.mark.parametrize("identifier, key", [
    # M5 Pro MacBook Pro: 14-inch and 16-inch (the catalogue had none).
    ("Mac17,9", "macbook-pro-m5-pro"), ("Mac17,8", "macbook-pro-m5-pro"),
    # The M4 iMac: four ports (Mac16,3) and two ports (Mac16,2) are two models, not one with four ports.
    ("Mac16,3", "imac-m4"), ("Mac16,2", "imac-m4-two-port"),
    # Every size and chip variant of a key.
    ("Mac16,6", "macbook-pro-m4-max"), ("Mac16,8", "macbook-pro-m4-pro"), ("Mac16,7", "macbook-pro-m4-pro"),
    ("Mac15,10", "macbook-pro-m3-max"), ("Mac15,11", "macbook-pro-m3-max"), ("Mac14,5", "macbook-pro-m2-max"),
    ("Mac14,10", "macbook-pro-m2-pro"), ("MacBookPro18,2", "macbook-pro-m1-max"), ("Mac14,15", "macbook-air-m2"),
    ("Mac16,13", "macbook-air-m4"), ("iMac21,2", "imac-m1"), ("Mac15,4", "imac-m3"),
    # Not in the catalogue: the M5 MacBook Air (ports unconfirmed) is judged from its own facts.
    ("Mac17,3", None), ("Mac17,4", None),
])
def test_corrected_identifiers_map_to_keys(identifier, key):
    found = models.by_identifier(identifier)
    assert (found.key if found else None) == key


def test_a_two_port_m4_imac_declared_as_the_four_port_one_is_a_contradiction():
    said = models.mismatch("i1", "imac-m4", macos("Mac16,2", "iMac", "Apple M4"))
    assert said.startswith("i1: ") and "Mac16,2" in said and "mlx_fleet_model: imac-m4-two-port" in said
    assert MODELS["imac-m4-two-port"].thunderbolt_devices == [(1, "en1"), (2, "en2")]


def test_every_entry_names_the_pages_it_was_checked_against_and_the_docs_link_them():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "models.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    for key, m in MODELS.items():
        assert m.evidence, key
        for page in m.evidence:
            assert page.startswith("https://") or (root / page).is_file(), (key, page)
            assert (page if page.startswith("https://") else "../" + page) in rows[key], (key, page)
        assert (m.unconfirmed or "-") in rows[key], key
