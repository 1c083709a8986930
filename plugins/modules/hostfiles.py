#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostfiles
short_description: Put the mlx.launch hostfiles on a Mac, both in one call
description:
  - Writes C(hostfile.json) and C(hostfile-ring.json) into O(path), the same path on every Mac, so
    C(mlx.launch --hostfile) works from any of them. The texts come from M(mlx_fleet.cluster.fabric) on the
    controller (its RV(mlx_fleet.cluster.fabric#module:hostfiles)), exactly as C(mlx.distributed_config) would write them.
  - Each file is read first and replaced only when its text differs, atomically (a temporary file beside
    it, synced, then moved over it), so C(mlx.launch) never reads half a hostfile.
  - Without O(ring_hostfile) (the cabling has no ring), a C(hostfile-ring.json) left from an earlier run is
    removed, so no stale ring hostfile stays behind.
  - Creates O(path) (mode 0755) when it is missing. Writing under C(/opt) needs root (C(become=true)).
  - With O(state=absent) both hostfiles are removed and the folder stays. Once the fabric is undone their
    addresses are gone, and C(mlx.launch) would try them.
  - With O(held), the same call keeps C(hostfile.held) beside them, the mark of an unfinished macOS update
    (M(mlx_fleet.cluster.os_update_hold)). A line writes it and leaves the hostfiles as they are (none is
    rewritten while the cluster is held); an empty one removes it, and the hostfiles are written as usual.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  path:
    description: The folder for the hostfiles on the Mac.
    type: path
    default: /opt/mlx-fleet
  hostfile:
    description: The text of C(hostfile.json), a JSON object. Required with O(state=present) unless O(held) is given.
    type: str
  ring_hostfile:
    description: The text of C(hostfile-ring.json), a JSON object; omitted or null when the cabling has no ring.
    type: str
  state:
    description: C(present) writes the hostfiles; C(absent) removes both.
    type: str
    choices: [present, absent]
    default: present
  held:
    description:
      - The line of C(hostfile.held), as RV(mlx_fleet.cluster.os_update_hold#module:line) of
        M(mlx_fleet.cluster.os_update_hold) gives it. Written when not empty, removed when empty; omitted,
        C(hostfile.held) is left as it is.
      - While it is not empty the hostfiles are left as they are.
    type: str
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Build the fabric on the controller
  mlx_fleet.cluster.fabric:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
  run_once: true
  register: fabric

- name: Put the hostfiles on every Mac
  mlx_fleet.cluster.hostfiles:
    hostfile: "{{ fabric.hostfiles['hostfile.json'] }}"
    ring_hostfile: "{{ fabric.hostfiles['hostfile-ring.json'] }}"
  become: true

- name: Mark them held while a macOS update is unfinished (an empty line releases the hold)
  mlx_fleet.cluster.hostfiles:
    held: "{{ hold.line }}"
  become: true

- name: Remove them once the fabric is undone
  mlx_fleet.cluster.hostfiles:
    state: absent
  become: true
"""

RETURN = r"""
path:
  description: The folder the hostfiles are in.
  returned: always
  type: str
  sample: /opt/mlx-fleet
files:
  description: What happened (or in check mode would happen) to each file, by name.
  returned: always
  type: dict
  sample: {"hostfile.json": "updated", "hostfile-ring.json": "removed", "hostfile.held": "absent"}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import HOSTFILE_DIR
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import (
    HELD, HOSTFILE, RING_HOSTFILE, read_text, write_atomically)


def plan(wanted, current):
    """{name: what happens} from {name: text or None (absent)} wanted and current."""
    actions = {}
    for name, text in wanted.items():
        now = current.get(name)
        if text is None:
            actions[name] = "removed" if now is not None else "absent"
        elif now is None:
            actions[name] = "created"
        else:
            actions[name] = "unchanged" if now == text else "updated"
    return actions


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=HOSTFILE_DIR),
            hostfile=dict(type="str"),
            ring_hostfile=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            held=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    folder = module.params["path"]
    present = module.params["state"] == "present"
    held = module.params["held"]
    if present and held is None and module.params["hostfile"] is None:
        module.fail_json(msg="state is present but the following are missing: hostfile (or held)")
    # The ring hostfile first: a reader of hostfile.json then finds its fallback already in place.
    wanted = {RING_HOSTFILE: module.params["ring_hostfile"], HOSTFILE: module.params["hostfile"]}
    if not present:
        wanted = dict.fromkeys(wanted)  # no text: removed
    elif held or module.params["hostfile"] is None:
        wanted = {}  # held (or only the hold asked for): the hostfiles stay as they are
    if held is not None:
        wanted[HELD] = held + "\n" if held else None
    for name, text in wanted.items():
        if text is None or name == HELD:
            continue
        try:
            if not isinstance(json.loads(text), dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            module.fail_json(msg="{0}: the text given is not a hostfile ({1}); pass the fabric's hostfiles".format(
                name, exc))

    current = dict((name, read_text(os.path.join(folder, name))) for name in wanted)
    files = plan(wanted, current)
    changing = [name for name, action in files.items() if action in ("created", "updated", "removed")]
    make_folder = present and not os.path.isdir(folder) and any(text is not None for text in wanted.values())
    result = dict(changed=bool(changing) or make_folder, path=folder, files=files)
    if module._diff:
        result["diff"] = [dict(before_header=os.path.join(folder, name), after_header=os.path.join(folder, name),
                               before=current[name] or "", after=wanted[name] or "") for name in changing]
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)

    try:
        if make_folder:
            os.makedirs(folder, 0o755)
        for name in changing:
            target = os.path.join(folder, name)
            if files[name] == "removed":
                os.unlink(target)
            else:
                write_atomically(module, target, wanted[name])
    except (IOError, OSError) as exc:
        module.fail_json(msg="{0}: cannot write the hostfiles ({1}); writing there needs root (become: true)".format(
            folder, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
