"""The onboarding visit sheet: what the person at the rack does for a new Mac, on one page.

The cables to plug (both ends, where each Mac stands, where the ports are), the Recovery step
when the new Mac needs RDMA, and what to run afterwards; in the Recovery checklist's look
(render/templates/visit-sheet.html.j2 and .txt.j2, sharing _sheet.css.j2 and _steps.j2), written
atomically beside the hostfile as onboard-NAME.html and onboard-NAME.txt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.checklist import enable_path
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text, private_folder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.cable_advice import Advice
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import printable, template_environment
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import Model


@dataclass
class Sheet:
    host: str
    macos: dict  # the new Mac's mlx_fleet_macos
    model: Model | None
    location: str | None
    advice: Advice
    needs_recovery: bool
    notes: list[str]  # said on the sheet as warnings
    models: dict[str, Model | None]  # every Mac's model, for the port positions
    locations: dict[str, str]  # where the other Macs stand
    devices: dict[Port, str]  # a port's network device (en3), where known
    afterwards: list[str]  # commands to run from the controller afterwards


def _end(sheet: Sheet, port: Port) -> str:
    device = sheet.devices.get(port)
    where = sheet.location if port.host == sheet.host else sheet.locations.get(port.host)
    return (f"{port_name(port)}{f' ({device})' if device else ''}"
            f"{f', {where}' if where else ''}")


def _rows(sheet: Sheet, cables: list[Cable], template: str) -> list[dict]:
    return [{"step": template.format(f"`{port_name(c.a)}`", f"`{port_name(c.b)}`"),
             "ends": f"{_end(sheet, c.a)} -- {_end(sheet, c.b)}"} for c in cables]


def context(sheet: Sheet, *, inventory: str, output_dir: str, generated: str) -> dict:
    macos = sheet.macos
    involved = [sheet.host] + [e.host for c in sheet.advice.cables + sheet.advice.unplug for e in (c.a, c.b)]
    ports_where = []
    for host in dict.fromkeys(involved):
        model = sheet.models.get(host)
        line = f"{model.model_name} ({model.key}): {model.ports_where}" if model and model.ports_where else None
        if line and line not in ports_where:
            ports_where.append(line)
    return printable({
        "node": {"host": sheet.host, "location": sheet.location, "model": sheet.model.key if sheet.model else None,
                 "model_name": macos["model_name"], "chip": macos.get("chip"),
                 "model_identifier": macos["model_identifier"], "serial_number": macos["serial_number"],
                 "product_version": macos["product_version"], "build_version": macos["build_version"],
                 "address": macos.get("management_address"),
                 "enable_path": enable_path(macos["product_version"]) if sheet.needs_recovery else None},
        "advice": sheet.advice.headline(),
        "notes": sheet.notes,
        "unplug": _rows(sheet, sheet.advice.unplug, "Unplug the cable between {} and {}"),
        "cables": _rows(sheet, sheet.advice.cables, "Connect {} to {}"),
        "ports_where": ports_where,
        "needs_recovery": sheet.needs_recovery,
        "afterwards": sheet.afterwards,
        "inventory": inventory,
        "output_dir": output_dir,
        "generated": generated,
    })


def render(ctx: dict) -> tuple[str, str]:
    """(html, text) for a context from ``context``."""
    env = template_environment()
    return env.get_template("visit-sheet.html.j2").render(ctx), env.get_template("visit-sheet.txt.j2").render(ctx)


def paths(directory: str | Path, host: str) -> tuple[Path, Path]:
    directory = Path(directory)
    return directory / f"onboard-{host}.html", directory / f"onboard-{host}.txt"


def write(directory: str | Path, sheet: Sheet, *, inventory: str, generated: str) -> tuple[Path, Path]:
    """Render the sheet and write both files atomically; (html, text)."""
    html_path, text_path = paths(directory, sheet.host)
    html, text = render(context(sheet, inventory=inventory, output_dir=str(directory), generated=generated))
    private_folder(directory)
    atomic_write_text(html_path, html)
    atomic_write_text(text_path, text)
    return html_path, text_path
