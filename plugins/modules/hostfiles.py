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


ARGUMENT_SPEC = dict(
    path=dict(type="path", default=HOSTFILE_DIR),
    hostfile=dict(type="str"),
    ring_hostfile=dict(type="str"),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    held=dict(type="str"),
)


def with_hold(wanted, held):
    """wanted with the hold's file when held is given: written with its text, removed when empty."""
    if held is not None:
        wanted[HELD] = held + "\n" if held else None
    return wanted


def present(module):
    """{name: text} state=present writes, in order: the ring hostfile first, so a reader of hostfile.json finds
    its fallback already in place. While held (or when only the hold is asked for) the hostfiles stay as they are."""
    params = module.params
    if params["held"] is None and params["hostfile"] is None:
        module.fail_json(msg="state is present but the following are missing: hostfile (or held)")
    wanted = {}
    if not params["held"] and params["hostfile"] is not None:
        wanted = {RING_HOSTFILE: params["ring_hostfile"], HOSTFILE: params["hostfile"]}
    for name, text in wanted.items():
        try:
            if text is not None and not isinstance(json.loads(text), dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            module.fail_json(msg="{0}: the text given is not a hostfile ({1}); pass the fabric's hostfiles".format(
                name, exc))
    return with_hold(wanted, params["held"])


def absent(module):
    """{name: text or None} of state=absent: both hostfiles removed, and the hold as held says when given."""
    return with_hold(dict.fromkeys((RING_HOSTFILE, HOSTFILE)), module.params["held"])


STATES = {"present": present, "absent": absent}


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


def report(module, wanted, current):
    """The result: what happens to each file, and the diff of those that change."""
    folder = module.params["path"]
    files = plan(wanted, current)
    changing = [name for name, action in files.items() if action in ("created", "updated", "removed")]
    result = dict(changed=bool(changing) or making_folder(module, wanted), path=folder, files=files)
    if module._diff:
        result["diff"] = [dict(before_header=os.path.join(folder, name), after_header=os.path.join(folder, name),
                               before=current[name] or "", after=wanted[name] or "") for name in changing]
    return result


def making_folder(module, wanted):
    folder = module.params["path"]
    return module.params["state"] == "present" and not os.path.isdir(folder) and any(
        text is not None for text in wanted.values())


def apply(module, wanted, result):
    """The one write path: the folder when missing, then each file that changes, in order."""
    folder = module.params["path"]
    try:
        if making_folder(module, wanted):
            os.makedirs(folder, 0o755)
        for name, action in result["files"].items():
            target = os.path.join(folder, name)
            if action == "removed":
                os.unlink(target)
            elif action in ("created", "updated"):
                write_atomically(module, target, wanted[name])
    except (IOError, OSError) as exc:
        module.fail_json(msg="{0}: cannot write the hostfiles ({1}); writing there needs root (become: true)".format(
            folder, exc), **result)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    wanted = STATES[module.params["state"]](module)
    current = dict((name, read_text(os.path.join(module.params["path"], name))) for name in wanted)
    result = report(module, wanted, current)
    if result["changed"] and not module.check_mode:
        apply(module, wanted, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
