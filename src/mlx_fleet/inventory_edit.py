"""Add a Mac and its cables to the user's inventory, keeping comments, key order and formatting.

Only the CLI edits an inventory (the collection never does), so only the CLI needs ruamel.yaml's
round trip. The inventory must be one YAML file (or a folder with exactly one YAML inventory file and
group_vars beside it) that ruamel writes back byte for byte as it read it; anything else is left
alone and the caller prints the lines to add (``lines_to_add``).

Where things go: the host under the group's ``hosts`` (at the end, so ranks of the others stay);
the cables into whichever file already defines ``mlx_fleet_cables`` (group_vars/mlx_cluster.yml or
group_vars/mlx_cluster/*.yml beside the inventory, the group's ``vars``, then group_vars/all and
``all: vars``), else into the group's ``vars``.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError, parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP as GROUP

CABLES = "mlx_fleet_cables"
BACKUP_SUFFIX = ".mlx-fleet.bak"
# (mapping indent, sequence indent, sequence dash offset) as people write YAML inventories.
_STYLES = ((2, 2, 0), (2, 4, 2), (4, 4, 0), (4, 6, 2), (4, 4, 2), (2, 3, 1))


class NotEditable(Exception):
    """The inventory is not one YAML file mlx-fleet can rewrite faithfully; the message says why."""


@dataclass
class Edit:
    host: str
    host_vars: dict  # in the order they are written
    add_cables: list[str] = field(default_factory=list)
    remove_cables: list[str] = field(default_factory=list)


def backup_path(path: Path, when: float | None = None) -> Path:
    """Where the file's text before an edit at WHEN (now) is kept: beside it, named by the UTC time so every
    edit keeps its own (a second edit in the same second is -2, -3, ...), with an extension Ansible skips in
    an inventory folder and in group_vars (.bak)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    backup, number = path.with_name(f"{path.name}.{stamp}{BACKUP_SUFFIX}"), 1
    while backup.exists():
        number += 1
        backup = path.with_name(f"{path.name}.{stamp}-{number}{BACKUP_SUFFIX}")
    return backup


def replace_file(path: Path, text: str) -> Path | None:
    """Write text over path atomically, keeping the file's mode (0600 for a new file) and its previous
    text in a new backup_path(path) (returned; None for a new file). A symlink stays one: the file it names
    is rewritten (a dotfiles repository, a shared inventory)."""
    target = Path(os.path.realpath(path))
    if not target.exists():
        atomic_write_text(target, text, mode=0o600)
        return None
    mode = target.stat().st_mode & 0o777
    backup = backup_path(path)
    atomic_write_text(backup, target.read_bytes().decode("utf-8"), mode=mode)
    atomic_write_text(target, text, mode=mode)
    return backup


class _Document:
    """One YAML file, loaded for a faithful round trip."""

    def __init__(self, path: Path):
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        self.path = path
        try:
            # Bytes decoded as they are (no newline translation): a file ruamel would not write back the
            # same, CRLF endings too, is refused below rather than rewritten.
            self.text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotEditable(f"{path} is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise NotEditable(f"cannot read {path}: {exc.strerror}") from None
        for mapping, sequence, offset in _STYLES:
            yaml = YAML()
            yaml.preserve_quotes = True
            yaml.width = 4096
            yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
            try:
                data = yaml.load(self.text)
                same = self._dump(yaml, data) == self.text
            except YAMLError as exc:
                raise NotEditable(f"{path} is not YAML ({str(exc).splitlines()[0]})") from exc
            except (AttributeError, IndexError, KeyError, TypeError, ValueError, RecursionError) as exc:
                # ruamel.yaml's own failures on YAML it cannot build or write back (a merge key naming its own
                # mapping, a comment before a lone [], nesting deeper than Python follows): a YAML error too.
                raise NotEditable(f"{path} is YAML mlx-fleet cannot read back ({type(exc).__name__}: "
                                  f"{' '.join(str(exc).split())})") from exc
            if same:
                self.yaml, self.data = yaml, data
                return
        raise NotEditable(f"{path} would not keep its formatting if mlx-fleet rewrote it")

    @staticmethod
    def _dump(yaml, data) -> str:
        out = io.StringIO()
        yaml.dump(data, out)
        return out.getvalue()

    def dumped(self) -> str:
        return self._dump(self.yaml, self.data)


def inventory_file(inventories: list[str]) -> Path:
    """The one YAML inventory file to edit, or NotEditable."""
    if len(inventories) != 1:
        raise NotEditable("several inventories (-i) were given")
    path = Path(inventories[0])
    if path.is_dir():
        files = [f for f in sorted(path.iterdir()) if f.is_file() and f.suffix in (".yml", ".yaml")]
        if len(files) != 1:
            raise NotEditable(f"{path} holds {len(files)} YAML inventory files, not one")
        path = files[0]
    if path.suffix not in (".yml", ".yaml"):
        raise NotEditable(f"{path} is not a YAML inventory (.yml)")
    return path


def _group(data) -> dict | None:
    if not isinstance(data, dict):
        return None
    children = (data.get("all") or {}).get("children") if isinstance(data.get("all"), dict) else None
    if isinstance(children, dict) and isinstance(children.get(GROUP), dict):
        return children[GROUP]
    return data[GROUP] if isinstance(data.get(GROUP), dict) else None


def _vars_files(folder: Path, group: str) -> list[Path]:
    vars_dir = folder / "group_vars"
    files = [vars_dir / f"{group}{suffix}" for suffix in (".yml", ".yaml", "")]
    files += sorted((vars_dir / group).glob("*.yml")) + sorted((vars_dir / group).glob("*.yaml"))
    return [f for f in files if f.is_file()]


def _cables_home(inventory: _Document) -> tuple[_Document, dict]:
    """The document and mapping that define mlx_fleet_cables (see the module doc)."""
    folder = inventory.path.parent
    group = _group(inventory.data)
    homes: list[tuple[_Document | None, Path | None, dict | None]] = []
    homes += [(None, f, None) for f in _vars_files(folder, GROUP)]
    homes.append((inventory, None, group.get("vars")))
    homes += [(None, f, None) for f in _vars_files(folder, "all")]
    all_vars = (inventory.data.get("all") or {}).get("vars") if isinstance(inventory.data.get("all"), dict) else None
    homes.append((inventory, None, all_vars))
    for document, path, mapping in homes:
        if path is not None:
            document = _Document(path)
            mapping = document.data
        if isinstance(mapping, dict) and CABLES in mapping:
            return document, mapping
    if _editable(group.get("vars"), f"{inventory.path}: {GROUP}: vars") is None:
        from ruamel.yaml.comments import CommentedMap

        group["vars"] = CommentedMap()
    return inventory, group["vars"]


def _editable(node, where: str, kinds: tuple = (dict,)):
    """node, when mlx-fleet can change it in place without changing anything else (None: it makes a new one),
    else NotEditable: another kind of value (a Jinja expression, a variable) would be replaced, losing what
    it holds, and a node under a YAML anchor or merge key (&name, *name, <<) is shared with every place
    naming it, which would change too."""
    if node is None:
        return None
    if not isinstance(node, kinds):
        raise NotEditable(f"{where} is {_kind(node)}, not the {'mapping' if kinds == (dict,) else 'list'} "
                          "mlx-fleet can add to")
    if getattr(getattr(node, "anchor", None), "value", None) or getattr(node, "merge", None):
        raise NotEditable(f"{where} is shared through a YAML anchor or merge key (&, *, <<), and every place "
                          "naming it would change too")
    return node


def _kind(node) -> str:
    return "a text" if isinstance(node, str) else f"a {type(node).__name__.replace('Commented', '').lower()}"


def _key(text: str):
    try:
        return parse_cable(text).key
    except CablePlanError:
        return text


def apply(inventories: list[str], edit: Edit) -> dict[Path, Path | None]:
    """Write the host and the cables into the inventory; the files changed (none when all were there),
    each with the backup_path() keeping its previous text. Raises NotEditable before writing anything when
    the inventory is not one YAML file mlx-fleet can edit faithfully. Callers hold the run lock: two edits
    never interleave."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    inventory = _Document(inventory_file(inventories))
    group = _group(inventory.data)
    if group is None:
        raise NotEditable(f"{inventory.path} has no group {GROUP}")
    where = f"{inventory.path}: {GROUP}"
    _editable(group, where)
    if _editable(group.get("hosts"), f"{where}: hosts") is None:
        group["hosts"] = CommentedMap()
    entry = _editable(group["hosts"].get(edit.host), f"{where}: hosts: {edit.host}")
    if entry is None:
        entry = group["hosts"][edit.host] = CommentedMap()
    for key, value in edit.host_vars.items():
        if entry.get(key) != value:
            entry[key] = value
    documents = {inventory.path: inventory}
    if edit.add_cables or edit.remove_cables:
        document, mapping = _cables_home(inventory)
        documents.setdefault(document.path, document)
        _editable(mapping, f"{document.path}: the mapping holding {CABLES}")
        cables = _editable(mapping.get(CABLES), f"{document.path}: {CABLES}", (list,))
        if cables is None:
            cables = mapping[CABLES] = CommentedSeq()
        gone = {_key(c) for c in edit.remove_cables}
        for index in reversed(range(len(cables))):
            if _key(str(cables[index])) in gone:
                del cables[index]
        present = {_key(str(c)) for c in cables}
        cables.extend(c for c in edit.add_cables if _key(c) not in present)
    # Render every file before writing any, so a failure leaves the inventory as it was.
    new_texts = {path: document.dumped() for path, document in documents.items()}
    changed = [path for path, text in new_texts.items() if text != documents[path].text]
    return {path: replace_file(path, new_texts[path]) for path in changed}


def lines_to_add(edit: Edit) -> str:
    """What a person adds by hand to an inventory mlx-fleet cannot edit: YAML, and the INI line."""
    import yaml

    host = yaml.safe_dump({edit.host: edit.host_vars or None}, sort_keys=False, default_flow_style=False)
    out = [f"under {GROUP}: hosts: (YAML)", *("  " + line for line in host.splitlines())]
    ini = " ".join([edit.host] + [f"{k}={_ini_value(v)}" for k, v in edit.host_vars.items()])
    out += [f"or, in an INI inventory's [{GROUP}] section:", f"  {ini}"]
    if edit.add_cables:
        out.append(f"add to {CABLES}:")
        out += [f"  - {c}" for c in edit.add_cables]
    if edit.remove_cables:
        out.append(f"remove from {CABLES}:")
        out += [f"  - {c}" for c in edit.remove_cables]
    return "\n".join(out)


def _ini_value(value) -> str:
    text = str(value)
    return f'"{text}"' if any(c in text for c in ' "#;=') else text
