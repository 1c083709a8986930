"""The Apple Silicon Macs mlx-fleet knows: what their Thunderbolt ports are and can do.

Inventories name a host's model by its key (``mlx_fleet_model: studio-m3-ultra``);
the inventory checks, the fabric and the RDMA readiness use the port facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import hardware_port


@dataclass(frozen=True)
class Model:
    key: str
    model_name: str  # what system_profiler calls it ("Mac mini")
    model_id: str  # hw.model ("Mac16,11")
    chip: str
    cpu_cores: str
    ncpu: int
    memory_gb: int
    # 5: Thunderbolt 5 (ports "Up to 120 Gb/s", 80 Gb/s links); 4: 40 Gb/s, Thunderbolt 4 and the "Thunderbolt /
    # USB 4" ports (Thunderbolt 3) of the M1, M2 and M3 Macs
    tb_generation: int
    # networksetup hardware ports in -listallhardwareports order: (port name, device);
    # the Thunderbolt Bridge (bridge0) every Mac has comes on top.
    hardware_ports: tuple[tuple[str, str], ...]
    management_device: str
    # Thunderbolt receptacles whose RDMA never comes up (the Mac Studio port beside Ethernet)
    rdma_broken_ports: tuple[int, ...] = ()
    # Where the Thunderbolt ports are on the case, for a person with a cable in hand.
    ports_where: str = ""
    also_ids: tuple[str, ...] = ()  # the other hw.model values sold under this key (14- and 16-inch, ...)
    source: str = ""  # the Apple tech specs page the ports come from (SPECS[model_name] lists them)
    # The public pages that confirm this entry's identifiers, port count and generation (docs/models.md), and
    # what none of them confirms.
    evidence: tuple[str, ...] = ()
    unconfirmed: str = ""

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(i for i in (self.model_id,) + self.also_ids if i)

    @property
    def source_url(self) -> str:
        return SPECS[self.model_name][0]

    @property
    def thunderbolt_devices(self) -> list[tuple[int, str]]:
        return [
            (int(port.split()[1]), device)
            for port, device in self.hardware_ports
            if port.startswith("Thunderbolt ") and port.split()[1].isdigit()
        ]

    @property
    def port_count(self) -> int:
        return len(self.thunderbolt_devices)


def _tb_ports(first_device: int, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((hardware_port(n), f"en{first_device + n - 1}") for n in range(1, count + 1))


def _cores(performance: int, efficiency: int, words: tuple[str, str] = ("performance", "efficiency")) -> str:
    return f"{performance + efficiency} ({performance} {words[0]} and {efficiency} {words[1]})"


# Chips: (CPU cores as system_profiler prints them, hw.ncpu, a common memory size in GB).
_CHIPS = {
    "M1": (_cores(4, 4), 8, 16), "M1 Pro": (_cores(8, 2), 10, 32), "M1 Max": (_cores(8, 2), 10, 64),
    "M1 Ultra": (_cores(16, 4), 20, 128),
    "M2": (_cores(4, 4), 8, 16), "M2 Pro": (_cores(8, 4), 12, 32), "M2 Max": (_cores(8, 4), 12, 64),
    "M2 Ultra": (_cores(16, 8), 24, 192),
    "M3": (_cores(4, 4), 8, 16), "M3 Pro": (_cores(6, 6), 12, 36), "M3 Max": (_cores(12, 4), 16, 128),
    "M3 Ultra": (_cores(24, 8), 32, 512),
    "M4": (_cores(4, 6), 10, 32), "M4 Pro": (_cores(10, 4), 14, 64), "M4 Max": (_cores(12, 4), 16, 128),
    # M5 Pro/Max: super and performance cores (an M5 Max reads "proc 18:6:0:12", tests/fixtures/macos).
    "M5": (_cores(4, 6), 10, 32), "M5 Pro": (_cores(6, 12, ("super", "performance")), 18, 64),
    "M5 Max": (_cores(6, 12, ("super", "performance")), 18, 128),
}

# Where the facts come from: Apple's tech specs (port count, Thunderbolt generation; one page per
# model, listed by family at these addresses) and its "Identify your Mac" pages (model identifiers).
SPECS = {
    "Mac Studio": ("https://support.apple.com/specs/macstudio", "https://support.apple.com/en-us/102231"),
    "Mac mini": ("https://support.apple.com/specs/macmini", "https://support.apple.com/en-us/102852"),
    "MacBook Pro": ("https://support.apple.com/specs/macbookpro", "https://support.apple.com/en-us/108052"),
    "MacBook Air": ("https://support.apple.com/specs/macbookair", "https://support.apple.com/en-us/102869"),
    "iMac": ("https://support.apple.com/specs/imac", "https://support.apple.com/en-us/108054"),
    "Mac Pro": ("https://support.apple.com/specs/macpro", "https://support.apple.com/en-us/102887"),
}


def _model(key: str, name: str, ids: tuple[str, ...], chip: str, generation: int, ports: int, where: str, *,
           source: str, evidence: tuple[str, ...], broken: tuple[int, ...] = (), unconfirmed: str = "") -> Model:
    """A catalogue entry. Device numbering: a desktop's Ethernet is en0 and Wi-Fi en1, so Thunderbolt 1 is
    en2 (captured on a Mac Studio: Thunderbolt 1..6 = en2..en7); a laptop's Wi-Fi is en0, Thunderbolt 1 en1;
    the Mac Pro's two Ethernet ports and Wi-Fi come first; an iMac's Ethernet (in its power adapter, only some
    configurations) is left out."""
    cores, ncpu, memory = _CHIPS[chip]
    if name in ("MacBook Pro", "MacBook Air", "iMac"):
        hardware = (("Wi-Fi", "en0"),) + _tb_ports(1, ports)
    elif name == "Mac Pro":
        hardware = (("Ethernet 1", "en0"), ("Ethernet 2", "en1"), ("Wi-Fi", "en2")) + _tb_ports(3, ports)
    else:
        hardware = (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, ports)
    return Model(key, name, ids[0] if ids else "", f"Apple {chip}", cores, ncpu, memory, generation, hardware, "en0",
                 rdma_broken_ports=broken, ports_where=where, also_ids=ids[1:], source=source, evidence=evidence,
                 unconfirmed=unconfirmed)


# Pages found with the search tool that confirm identifiers, port counts and Thunderbolt generations
# (docs/models.md: which page says what, and what none of them confirms).
_IDS_APPLE_LIST = "https://raw.githubusercontent.com/quacktacular/mac-device-id-to-model/main/models.txt"
_IDS_SUPPORT_APPLE = "https://github.com/fluttercommunity/plus_plugins/pull/3700/files"
_IDS_STUDIO_2023 = "https://theapplewiki.com/wiki/Mac_Studio_(2023)"
_CAPTURES = "tests/fixtures/macos/README.md"
_STUDIO_2025 = ("https://www.pocket-lint.com/the-mac-studio-gets-the-m4-max-and-m3-ultra-chip/",
                "https://9to9trends.com/?p=11475")
_STUDIO_2023 = ("https://www.imore.com/mac/m2-mac-studio-2023",
                "https://www.techspot.com/news/98961-apple-launches-new-mac-studio-m2-max-m2.html")
_STUDIO_2022 = ("https://wikimili.com/en/Mac_Studio",)
_MINI_2024 = ("https://support.apple.com/en-sg/121555",
              "https://www.macrumors.com/2024/10/29/apple-announces-redesigned-mac-mini/",
              "https://apple.gadgetdb.win/mac/mac-mini/mac-mini-m4-pro-12-core-cpu-16-core-gpu-2024-specs")
_MINI_2023 = ("https://pocketnow.com/m2-pro-mac-mini/",
              "https://www.pocket-lint.com/apple-mac-mini-m2-vs-m2-pro-vs-m1/")
_M1_2020 = ("https://www.macrumors.com/2020/11/10/m1-mac-models-thunderbolt-3/",)
_MBP_M5_PRO_MAX = ("https://www.warensemble.com/?page=001-forum.ssjs&sub=unet-csysmmsc&thread=2471",)
_MBP_M5 = ("https://aggregoctt.github.io/new-apple-m5-is-the-centerpiece-of-an-updated-14-i-ZjzAPBk0EfBff8iKVL3C7w",)
_M4_FAMILY = ("https://idropnews.com/gallery/5-surprises-from-apples-week-of-mac/227491/3",)
_MBP_M3 = ("https://mytechnologie.org/2023/11/01/14%e2%80%b3-macbook-pro-mit-m3-hat-nur-zwei-thunderbolt-3-anschlusse",
           "https://discussions.apple.com/thread/255488566")
_MBP_2021 = ("https://macdailynews.com/2021/10/19/apples-new-macbook-pro-models-have-hdmi-2-0-not-hdmi-2-1/",
             "https://www.buzzfeednews.com/article/katienotopoulos/apple-new-macbook-pros-airpods")
_MBP_2023 = ("https://everymac.com/systems/apple/macbook_pro/macbook-pro-silicon-faq/"
             "differences-between-macbook-pro-14-inch-16-inch-2021-2023.html",)
_MBP_13 = ("https://wikimili.com/en/MacBook_Pro_(Apple_silicon)", "https://discussions.apple.com/thread/255488566")
_AIR_M4 = ("https://web-production-4e80b.up.railway.app/page/MacBook_Air",)
_AIR_M3_M2 = ("https://suamacbook.vn/macbook-air-co-cong-usb-khong-dong-nao-da-bo-cong-nay",
              "https://discussions.apple.com/thread/255488566")
_IMAC_M4 = ("https://grokipedia.com/page/iMac_24-inch_2024",) + _M4_FAMILY
_IMAC_M1 = ("https://forums.macrumors.com/threads/need-advice-on-usb-adapter-for-peripherals.2301950",)
_MAC_PRO = ("https://gadgetmarket.info/mac-pro-with-m2-ultra-first-look-boy-that-s-a-big-chip/",)
# Identifiers no Apple page found with the search tool lists: a board list generated from api.ipsw.me, in the
# search tool's file index (which names no repository), is the only source besides the captures.
_IDS_BOARD_LIST = "identifiers from a board list generated from api.ipsw.me (file index, repository not named)"

_TB5_STUDIO_FRONT = ("four Thunderbolt 5 ports on the back and two on the front; Thunderbolt 1 is the one on the "
                     "back beside Ethernet")
_MBP3 = "three Thunderbolt {0} ports: two on the left side, one on the right"
_AIR2 = "two Thunderbolt ports on the left side"

MODELS: dict[str, Model] = {
    m.key: m
    for m in (
        # Mac Studio. The port beside Ethernet never brings RDMA up (Thunderbolt 1 on a Thunderbolt 5 Studio).
        # Mac Studio (2025): M3 Ultra six Thunderbolt 5 (4 back, 2 front); M4 Max four Thunderbolt 5 on the back,
        # the two front USB-C ports are 10 Gb/s USB.
        _model("studio-m3-ultra", "Mac Studio", ("Mac15,14",), "M3 Ultra", 5, 6, _TB5_STUDIO_FRONT,
               source="Mac Studio (2025)", evidence=_STUDIO_2025 + (_CAPTURES,), broken=(1,)),
        _model("studio-m4-max", "Mac Studio", ("Mac16,9",), "M4 Max", 5, 4,
               "four Thunderbolt 5 ports on the back, Thunderbolt 1 beside Ethernet (the two USB-C ports on the "
               "front are not Thunderbolt)", source="Mac Studio (2025)", evidence=_STUDIO_2025, broken=(1,),
               unconfirmed=_IDS_BOARD_LIST),
        # Mac Studio (2023): four Thunderbolt 4 on the back; two more on the front of the M2 Ultra (USB-C on M2 Max).
        _model("studio-m2-ultra", "Mac Studio", ("Mac14,14",), "M2 Ultra", 4, 6,
               "four Thunderbolt 4 ports on the back and two on the front", source="Mac Studio (2023)",
               evidence=_STUDIO_2023 + (_IDS_STUDIO_2023,)),
        _model("studio-m2-max", "Mac Studio", ("Mac14,13",), "M2 Max", 4, 4,
               "four Thunderbolt 4 ports on the back (the two USB-C ports on the front are not Thunderbolt)",
               source="Mac Studio (2023)", evidence=_STUDIO_2023 + (_IDS_STUDIO_2023,)),
        # Mac Studio (2022): the same, M1 Ultra and M1 Max.
        _model("studio-m1-ultra", "Mac Studio", ("Mac13,2",), "M1 Ultra", 4, 6,
               "four Thunderbolt 4 ports on the back and two on the front", source="Mac Studio (2022)",
               evidence=_STUDIO_2022 + (_IDS_APPLE_LIST,)),
        _model("studio-m1-max", "Mac Studio", ("Mac13,1",), "M1 Max", 4, 4,
               "four Thunderbolt 4 ports on the back (the two USB-C ports on the front are not Thunderbolt)",
               source="Mac Studio (2022)", evidence=_STUDIO_2022 + (_IDS_APPLE_LIST,)),
        # Mac mini (2024): M4 Pro three Thunderbolt 5, M4 three Thunderbolt 4, on the back; two 10 Gb/s USB-C in front.
        _model("mini-m4-pro", "Mac mini", ("Mac16,11",), "M4 Pro", 5, 3,
               "three Thunderbolt 5 ports on the back (the two USB-C ports on the front are not Thunderbolt)",
               source="Mac mini (2024)", evidence=_MINI_2024, unconfirmed=_IDS_BOARD_LIST),
        _model("mini-m4", "Mac mini", ("Mac16,10",), "M4", 4, 3,
               "three Thunderbolt 4 ports on the back (the two USB-C ports on the front are not Thunderbolt)",
               source="Mac mini (2024)", evidence=_MINI_2024, unconfirmed=_IDS_BOARD_LIST),
        # Mac mini (2023): M2 Pro four Thunderbolt 4, M2 two, on the back.
        _model("mini-m2-pro", "Mac mini", ("Mac14,12",), "M2 Pro", 4, 4, "four Thunderbolt 4 ports on the back",
               source="Mac mini (2023)", evidence=_MINI_2023 + (_IDS_APPLE_LIST,)),
        _model("mini-m2", "Mac mini", ("Mac14,3",), "M2", 4, 2, "two Thunderbolt 4 ports on the back",
               source="Mac mini (2023)", evidence=_MINI_2023 + (_IDS_APPLE_LIST,)),
        # Mac mini (M1, 2020): two Thunderbolt / USB 4 ports (Thunderbolt 3, 40 Gb/s) on the back.
        _model("mini-m1", "Mac mini", ("Macmini9,1",), "M1", 4, 2, "two Thunderbolt / USB 4 ports on the back",
               source="Mac mini (M1, 2020)", evidence=_M1_2020 + (_IDS_APPLE_LIST,)),
        # MacBook Pro (14-inch and 16-inch, 2026): M5 Pro and M5 Max three Thunderbolt 5 (Mac17,7 and Mac17,6 are
        # M5 Max captures, tests/fixtures/macos: three receptacles, idle at "Up to 120 Gb/s"); (14-inch, M5, 2025)
        # three Thunderbolt 4.
        _model("macbook-pro-m5-max", "MacBook Pro", ("Mac17,7", "Mac17,6"), "M5 Max", 5, 3, _MBP3.format(5),
               source="MacBook Pro (14-inch and 16-inch, M5 Pro or M5 Max)", evidence=_MBP_M5_PRO_MAX + (_CAPTURES,)),
        _model("macbook-pro-m5-pro", "MacBook Pro", ("Mac17,9", "Mac17,8"), "M5 Pro", 5, 3, _MBP3.format(5),
               source="MacBook Pro (14-inch and 16-inch, M5 Pro or M5 Max)", evidence=_MBP_M5_PRO_MAX,
               unconfirmed=_IDS_BOARD_LIST + "; the port count (three, as on the M5 Max capture)"),
        _model("macbook-pro-m5", "MacBook Pro", ("Mac17,2",), "M5", 4, 3, _MBP3.format(4),
               source="MacBook Pro (14-inch, M5)", evidence=_MBP_M5 + (_IDS_SUPPORT_APPLE,)),
        # MacBook Pro (14-inch and 16-inch, 2024): M4 Pro and M4 Max three Thunderbolt 5, M4 three Thunderbolt 4.
        _model("macbook-pro-m4-max", "MacBook Pro", ("Mac16,6", "Mac16,5"), "M4 Max", 5, 3, _MBP3.format(5),
               source="MacBook Pro (14-inch and 16-inch, M4 Pro or M4 Max, 2024)",
               evidence=_M4_FAMILY + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-pro-m4-pro", "MacBook Pro", ("Mac16,8", "Mac16,7"), "M4 Pro", 5, 3, _MBP3.format(5),
               source="MacBook Pro (14-inch and 16-inch, M4 Pro or M4 Max, 2024)",
               evidence=_M4_FAMILY + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-pro-m4", "MacBook Pro", ("Mac16,1",), "M4", 4, 3, _MBP3.format(4),
               source="MacBook Pro (14-inch, M4, 2024)", evidence=_M4_FAMILY + _MBP_M5 + (_IDS_SUPPORT_APPLE,)),
        # MacBook Pro (14-inch and 16-inch, Nov 2023): M3 Pro/Max three Thunderbolt 4, M3 two Thunderbolt / USB 4.
        _model("macbook-pro-m3-max", "MacBook Pro", ("Mac15,8", "Mac15,10", "Mac15,9", "Mac15,11"), "M3 Max", 4, 3,
               _MBP3.format(4), source="MacBook Pro (14-inch and 16-inch, M3 Pro or M3 Max, Nov 2023)",
               evidence=_MBP_M3 + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-pro-m3-pro", "MacBook Pro", ("Mac15,6", "Mac15,7"), "M3 Pro", 4, 3, _MBP3.format(4),
               source="MacBook Pro (14-inch and 16-inch, M3 Pro or M3 Max, Nov 2023)",
               evidence=_MBP_M3 + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-pro-m3", "MacBook Pro", ("Mac15,3",), "M3", 4, 2, "two Thunderbolt / USB 4 ports on the left",
               source="MacBook Pro (14-inch, M3, Nov 2023)", evidence=_MBP_M3 + (_IDS_SUPPORT_APPLE,)),
        # MacBook Pro (14-inch and 16-inch, 2023): M2 Pro/Max three Thunderbolt 4; (13-inch, M2, 2022) two.
        _model("macbook-pro-m2-max", "MacBook Pro", ("Mac14,5", "Mac14,6"), "M2 Max", 4, 3, _MBP3.format(4),
               source="MacBook Pro (14-inch and 16-inch, 2023)", evidence=_MBP_2023 + (_IDS_APPLE_LIST,)),
        _model("macbook-pro-m2-pro", "MacBook Pro", ("Mac14,9", "Mac14,10"), "M2 Pro", 4, 3, _MBP3.format(4),
               source="MacBook Pro (14-inch and 16-inch, 2023)", evidence=_MBP_2023 + (_IDS_APPLE_LIST,)),
        _model("macbook-pro-m2", "MacBook Pro", ("Mac14,7",), "M2", 4, 2, "two Thunderbolt / USB 4 ports on the left",
               source="MacBook Pro (13-inch, M2, 2022)", evidence=_MBP_13 + (_IDS_APPLE_LIST,)),
        # MacBook Pro (14-inch and 16-inch, 2021): three Thunderbolt 4; (13-inch, M1, 2020) two Thunderbolt / USB 4.
        _model("macbook-pro-m1-max", "MacBook Pro", ("MacBookPro18,4", "MacBookPro18,2"), "M1 Max", 4, 3,
               _MBP3.format(4), source="MacBook Pro (14-inch and 16-inch, 2021)",
               evidence=_MBP_2021 + (_IDS_APPLE_LIST,)),
        _model("macbook-pro-m1-pro", "MacBook Pro", ("MacBookPro18,3", "MacBookPro18,1"), "M1 Pro", 4, 3,
               _MBP3.format(4), source="MacBook Pro (14-inch and 16-inch, 2021)",
               evidence=_MBP_2021 + (_IDS_APPLE_LIST,)),
        _model("macbook-pro-m1", "MacBook Pro", ("MacBookPro17,1",), "M1", 4, 2,
               "two Thunderbolt / USB 4 ports on the left", source="MacBook Pro (13-inch, M1, 2020)",
               evidence=_M1_2020 + _MBP_13 + (_IDS_APPLE_LIST,)),
        # MacBook Air (13-inch and 15-inch, M4 / M3 / M2; M1 2020): two Thunderbolt ports (Thunderbolt 4 from M4,
        # Thunderbolt / USB 4 before; both 40 Gb/s).
        _model("macbook-air-m4", "MacBook Air", ("Mac16,12", "Mac16,13"), "M4", 4, 2, _AIR2,
               source="MacBook Air (13-inch and 15-inch, M4, 2025)", evidence=_AIR_M4 + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-air-m3", "MacBook Air", ("Mac15,12", "Mac15,13"), "M3", 4, 2, _AIR2,
               source="MacBook Air (13-inch and 15-inch, M3, 2024)", evidence=_AIR_M3_M2 + (_IDS_SUPPORT_APPLE,)),
        _model("macbook-air-m2", "MacBook Air", ("Mac14,2", "Mac14,15"), "M2", 4, 2, _AIR2,
               source="MacBook Air (M2, 2022) and (15-inch, M2, 2023)", evidence=_AIR_M3_M2 + (_IDS_APPLE_LIST,)),
        _model("macbook-air-m1", "MacBook Air", ("MacBookAir10,1",), "M1", 4, 2, _AIR2,
               source="MacBook Air (M1, 2020)", evidence=_M1_2020 + (_IDS_APPLE_LIST,)),
        # iMac (24-inch, 2024): the four-port model (Mac16,3) has four Thunderbolt 4 ports, the two-port model
        # (Mac16,2) two. iMac (24-inch, 2023 / M1 2021): two Thunderbolt / USB 4 ports; the four-port models add two
        # USB 3 ports that are not Thunderbolt.
        _model("imac-m4", "iMac", ("Mac16,3",), "M4", 4, 4, "four Thunderbolt 4 ports on the back",
               source="iMac (24-inch, 2024, Four ports)", evidence=_IMAC_M4 + (_IDS_APPLE_LIST,)),
        _model("imac-m4-two-port", "iMac", ("Mac16,2",), "M4", 4, 2, "two Thunderbolt ports on the back",
               source="iMac (24-inch, 2024, Two ports)", evidence=_IMAC_M4 + (_IDS_APPLE_LIST,),
               unconfirmed="whether the two ports are Thunderbolt 4 or Thunderbolt / USB 4 (40 Gb/s either way)"),
        _model("imac-m3", "iMac", ("Mac15,5", "Mac15,4"), "M3", 4, 2,
               "two Thunderbolt / USB 4 ports on the back (the two USB 3 ports of four-port models are not)",
               source="iMac (24-inch, 2023)", evidence=_M4_FAMILY + (_IDS_APPLE_LIST,)),
        _model("imac-m1", "iMac", ("iMac21,1", "iMac21,2"), "M1", 4, 2,
               "two Thunderbolt / USB 4 ports on the back (the two USB 3 ports of four-port models are not)",
               source="iMac (24-inch, M1, 2021)", evidence=_IMAC_M1 + (_IDS_APPLE_LIST,)),
        # Mac Pro (2023): eight Thunderbolt 4 (six on the back, two on the top; rack: two on the front).
        _model("mac-pro-m2-ultra", "Mac Pro", ("Mac14,8",), "M2 Ultra", 4, 8,
               "eight Thunderbolt 4 ports: six on the back, two on the top (the rack model: on the front)",
               source="Mac Pro (2023)", evidence=_MAC_PRO + (_IDS_APPLE_LIST,),
               unconfirmed="the rack model's two ports on the front"),
    )
}
DEFAULT_MODEL = "mini-m4-pro"


def by_identifier(identifier: str | None) -> Model | None:
    """The catalogue's model with this hw.model (``Mac16,9``), None when the catalogue lacks it."""
    return next((m for m in MODELS.values() if identifier and identifier in m.model_ids), None)


def identify(macos: dict) -> Model | None:
    """The catalogue's model of a Mac from its mlx_fleet_macos facts: by model identifier, else by its name
    and chip (a MacBook Pro with an Apple M5 Pro whose identifier the catalogue has not recorded)."""
    found = by_identifier(macos.get("model_identifier"))
    if found or not macos.get("model_identifier"):
        return found
    same = [m for m in MODELS.values() if (m.model_name, m.chip) == (macos.get("model_name"), macos.get("chip"))]
    return same[0] if len(same) == 1 else None


def model_for(key: str | None, macos: dict) -> Model | None:
    """A Mac's model: the inventory's mlx_fleet_model when it is a catalogue key, else identified from its facts."""
    return MODELS[key] if key in MODELS else identify(macos or {})


def resolve_keys(hosts, declared: dict, macos: dict) -> dict:
    """host -> model key: the declared one, else the key identified from the Mac's facts (hosts the catalogue
    cannot place are left out, and judged from their facts alone)."""
    out = {}
    for host in hosts:
        found = model_for(declared.get(host), macos.get(host) or {})
        if found:
            out[host] = found.key
    return out


def mismatch(host: str, key: str, macos: dict) -> str | None:
    """One line when the declared key is not the Mac that answered: both models and the fix; None when they agree
    (an identifier the catalogue lacks, on a Mac with the declared model's name and chip, agrees)."""
    declared = MODELS.get(key)
    identifier = macos.get("model_identifier")
    if not declared or not identifier or identifier in declared.model_ids:
        return None
    actual = identify(macos)
    if actual is declared:
        return None  # a newer identifier of the declared model (its name and chip)
    fix = f"set mlx_fleet_model: {actual.key}" if actual else "remove mlx_fleet_model (the Mac's own facts are read)"
    name = macos.get("model_name") or "Mac"
    article = "an" if name[0].lower() in "aeiou" else "a"  # "an iMac"
    return (f"{host}: mlx_fleet_model says {key} ({declared.model_name}, {declared.chip}) but the Mac is {article} "
            f"{name} ({identifier}, {macos.get('chip') or 'chip unknown'}); {fix}, "
            "or check that the inventory names the right Mac")


def generation_from_facts(thunderbolt: dict) -> int | None:
    """The Thunderbolt generation a Mac's own ports show (system_profiler SPThunderboltDataType): an idle port
    reports its rating ("Up to 120 Gb/s": Thunderbolt 5, "Up to 40 Gb/s": 4), a link at 80 Gb/s or more needs
    Thunderbolt 5. None when every port is linked at 40 Gb/s or less: a Thunderbolt 5 Mac cabled to
    Thunderbolt 4 ones reads that way too."""
    ports = thunderbolt.get("ports") or []
    speeds = [p.get("speed_gbps") or 0 for p in ports]
    if any(s >= 80 for s in speeds):
        return 5
    if any(p.get("speed_is_max") for p in ports):
        return 4
    return None


def link_speed(*generations: int) -> int:
    """Gb/s of a direct cable between ports of these Thunderbolt generations: TB5 only when both ends are."""
    return 80 if min(generations) >= 5 else 40
