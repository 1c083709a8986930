"""system_profiler(8): SPHardwareDataType and SPThunderboltDataType, text or -json.

JSON shape and key order from the reference capture (omlx-plus, M5 Max MacBook Pro
cabled to an M3 Ultra Mac Studio): keys sorted, ``" : "`` separators, two-space
indent, buses listed from the highest number down. SPHardwareDataType keys from
public captures (e.g. a Mac Studio's in a Go project's tests). The text form follows
captures quoted in public parser tests (Thunderbolt/USB4 Bus N blocks).
"""

from . import state
from .state import out

SERVICE_IP_UUID = "066216C9-46DB-48B5-A472-768F7EA51471"  # as in the reference capture


def dumps(value, indent: str = "") -> str:
    """json.dumps(VALUE, indent=2, separators=(",", " : "), sort_keys=True, ensure_ascii=False), the form
    system_profiler -json prints, without importing json (state.py says why); strings escaped by the same C
    function json uses."""
    from _json import encode_basestring

    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{encode_basestring(key)} : {dumps(item, inner)}" for key, item in sorted(value.items())]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}" if items else "{}"
    if isinstance(value, list):
        items = [inner + dumps(item, inner) for item in value]
        return "[\n" + ",\n".join(items) + f"\n{indent}]" if items else "[]"
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)  # a number


def hardware_items(node: dict) -> list[dict]:
    item = {
        "_name": "hardware_overview",
        "activation_lock_status": node.get("activation_lock_status", "activation_lock_disabled"),
        "boot_rom_version": node["boot_rom"],
        "chip_type": node["chip"],
        "machine_model": node["model_id"],
        "machine_name": node["model_name"],
        # Chips differ in how many fields they report (proc 16:12:4, proc 24:16:8:0).
        "number_processors": node.get("number_processors", "proc " + ":".join(state.cores(node))),
        "os_loader_version": node["boot_rom"],
        "physical_memory": f"{node['memory_gb']} GB",
        "platform_UUID": node["hardware_uuid"],
        "provisioning_UDID": node["provisioning_udid"],
        "serial_number": node["serial"],
    }
    if node.get("model_number"):
        item["model_number"] = node["model_number"]
    return [item]


def hardware_text(node: dict) -> str:
    lines = [
        "Hardware:",
        "",
        "    Hardware Overview:",
        "",
        f"      Model Name: {node['model_name']}",
        f"      Model Identifier: {node['model_id']}",
    ]
    if node.get("model_number"):
        lines.append(f"      Model Number: {node['model_number']}")
    lines += [
        f"      Chip: {node['chip']}",
        f"      Total Number of Cores: {node['cpu_cores']}",
        f"      Memory: {node['memory_gb']} GB",
        f"      System Firmware Version: {node['boot_rom']}",
        f"      OS Loader Version: {node['boot_rom']}",
        f"      Serial Number (system): {node['serial']}",
        f"      Hardware UUID: {node['hardware_uuid']}",
        f"      Provisioning UDID: {node['provisioning_udid']}",
        "      Activation Lock Status: "
        + ("Enabled" if node.get("activation_lock_status") == "activation_lock_enabled" else "Disabled"),
        "",
    ]
    return "\n".join(lines) + "\n"


def _mac_item(peer: dict) -> dict:
    return {
        "_name": peer["name"],
        "device_id_key": peer.get("device_id", "0xA"),
        "device_name_key": peer["model_id"],
        "domain_uuid_key": peer["domain_uuid"],
        "services_title": [
            {
                "_name": "service_ip",
                "protocol_id_key": 1,
                "protocol_revision_key": 1,
                "protocol_version_key": 1,
                "service_uuid_key": peer.get("service_uuid", SERVICE_IP_UUID),
            }
        ],
        "vendor_id_key": "0x0A27",
        "vendor_name_key": "Apple Inc.",
    }


def _device_item(link: dict) -> dict:
    """A drive or dock: no domain UUID (it is not a host), a Mac behind a dock one level down."""
    item = {
        "_name": link["name"],
        "device_name_key": link["name"],
        "route_string_key": "1",
        "vendor_name_key": link["vendor"],
    }
    if link.get("behind"):
        item["_items"] = [_mac_item(link["behind"])]
    return item


def _buses(node: dict) -> list[dict]:
    return sorted(node["thunderbolt"], key=lambda tb: tb["bus"], reverse=True)


def thunderbolt_items(node: dict) -> list[dict]:
    items = []
    for tb in _buses(node):
        link = tb.get("link")
        tag = {
            "current_speed_key": f"{link['speed_gbps']} Gb/s" if link else
            ("Up to 120 Gb/s" if tb["generation"] >= 5 else "Up to 40 Gb/s"),
            "link_status_key": "0x2" if link else "0x100",
            "receptacle_id_key": str(tb["receptacle"]),
            "receptacle_status_key": "receptacle_connected" if link else "receptacle_no_devices_connected",
        }
        # Some ports report a micro firmware version and some don't (the reference has both).
        if tb.get("micro_version", "0.0.0") is not None:
            tag["micro_version_key"] = tb.get("micro_version", "0.0.0")
        entry = {
            "_name": f"thunderboltusb4_bus_{tb['bus']}",
            "device_name_key": node["model_name"],
            "domain_uuid_key": tb["domain_uuid"],
            "receptacle_1_tag": tag,
            "route_string_key": "0",
            "switch_uid_key": tb["switch_uid"],
            "vendor_name_key": "Apple Inc.",
        }
        if link:
            entry["_items"] = [_mac_item(link["peer"]) if link["kind"] == "mac" else _device_item(link)]
        items.append(entry)
    return items


def _item_text(item: dict, indent: str) -> list[str]:
    lines = [f"{indent}{item['_name']}:", "", f"{indent}  Vendor Name: {item['vendor_name_key']}",
             f"{indent}  Device Name: {item['device_name_key']}"]
    if "domain_uuid_key" in item:
        lines += [
            f"{indent}  Device ID: {item['device_id_key']}",
            f"{indent}  Vendor ID: {item['vendor_id_key']}",
            f"{indent}  Domain UUID: {item['domain_uuid_key']}",
            f"{indent}  Services:",
            f"{indent}    Internet Protocol:",
            f"{indent}      Protocol ID: 1",
        ]
    for sub in item.get("_items", []):
        lines += [""] + _item_text(sub, indent + "  ")
    return lines


def thunderbolt_text(node: dict) -> str:
    lines = ["Thunderbolt/USB4:", ""]
    for entry in thunderbolt_items(node):
        tag = entry["receptacle_1_tag"]
        connected = tag["receptacle_status_key"] == "receptacle_connected"
        lines += [
            f"    Thunderbolt/USB4 Bus {entry['_name'].rsplit('_', 1)[1]}:",
            "",
            f"      Vendor Name: {entry['vendor_name_key']}",
            f"      Device Name: {entry['device_name_key']}",
            f"      UID: {entry['switch_uid_key']}",
            f"      Route String: {entry['route_string_key']}",
            f"      Domain UUID: {entry['domain_uuid_key']}",
            "      Port:",
            "          Status: " + ("Device connected" if connected else "No device connected"),
            f"          Link Status: {tag['link_status_key']}",
            f"          Speed: {tag['current_speed_key']}",
            f"          Receptacle: {tag['receptacle_id_key']}",
        ]
        if "micro_version_key" in tag:
            lines.append(f"          Micro Firmware Version: {tag['micro_version_key']}")
        for item in entry.get("_items", []):
            lines += [""] + _item_text(item, "        ")
        lines.append("")
    return "\n".join(lines) + "\n"


DATA_TYPES = {
    "SPHardwareDataType": (hardware_items, hardware_text),
    "SPThunderboltDataType": (thunderbolt_items, thunderbolt_text),
}


def main(argv: list[str]) -> int:
    as_json = "-json" in argv
    # Like system_profiler, data types it does not know produce nothing.
    wanted = [a for a in argv if a in DATA_TYPES]
    node = state.node()
    if as_json:
        data = {name: DATA_TYPES[name][0](node) for name in wanted}
        # system_profiler ends its JSON without a newline (zsh marks it with '%').
        out(dumps(data))
    else:
        out("".join(DATA_TYPES[name][1](node) for name in wanted))
    return 0
