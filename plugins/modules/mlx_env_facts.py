#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mlx_env_facts
short_description: Read a node's MLX environment state in one call
description:
  - Asks the node's target Python (O(python_interpreter), or, for a uv-managed Python, the
    interpreter Ansible runs with, which reports the node's platform) for its platform, version
    and environment markers, so the controller can choose the wheels that node needs.
  - Reads the venv at O(path) (its Python, installed distributions, and whether MLX imports and
    computes there), the artifacts already pushed to O(store) (sha256 of each wheel and of uv, the
    extracted uv-managed Python builds re-hashed against what was extracted), the fingerprint in
    the venv, whether the two folders were made by mlx-fleet, and C(uname -m).
  - Fails with one line when O(path) or O(store) is not a usable folder (relative, a system or home
    folder, one inside the other).
  - Changes nothing.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  python_interpreter:
    description: An interpreter already on the node to build the venv from; empty for a uv-managed Python.
    type: str
    default: ""
  owner:
    description: The user who must own the environment; empty for the login user.
    type: str
    default: ""
extends_documentation_fragment:
  - mlx_fleet.cluster.options.mlx_env
  - mlx_fleet.cluster.attributes.facts
"""

EXAMPLES = r"""
- name: Read the environment state
  mlx_fleet.cluster.mlx_env_facts:
    path: /opt/mlx-fleet/venv
    store: /opt/mlx-fleet/store
    python_interpreter: ""
  register: state
"""

RETURN = r"""
ansible_facts:
  description: The same state as the fact C(mlx_fleet_env), which the mlx_env role reads.
  returned: always
  type: dict
  contains:
    mlx_fleet_env:
      description: Every other value below, in one dict.
      type: dict
      returned: always
login_user:
  description: The user Ansible logs in as.
  returned: always
  type: str
  sample: admin
owner:
  description: The user who owns (or will own) the environment.
  returned: always
  type: str
  sample: admin
uname_machine:
  description: C(uname -m) on the node.
  returned: always
  type: str
  sample: arm64
to_make:
  description:
    - The folders to make before anything is installed - missing parents of O(path) and O(store)
      (to be root-owned), then O(path), C(.NAME.next) beside it (where the next venv is built) and
      O(store) when they are missing or not owned by O(owner).
      Empty once they exist.
  returned: always
  type: list
  elements: dict
  sample: [{path: /opt/mlx-fleet}, {path: /opt/mlx-fleet/venv, owner: admin, mode: "0755"}]
folders:
  description: For O(path) and O(store), C(missing), C(empty), C(ours) (made by mlx-fleet) or C(foreign).
  returned: always
  type: dict
  sample: {path: ours, store: ours}
target:
  description: The target interpreter (or, for a uv-managed Python, the node's platform) as its Python reports it.
  returned: always
  type: dict
  contains:
    source: {description: C(interpreter) or C(managed), type: str}
    path: {description: The interpreter asked, type: str}
    info: {description: "Platform, version and markers, or null when it cannot run", type: dict}
    error: {description: Why it could not be asked, type: str}
managed_builds:
  description: The uv-managed Python builds extracted in the store, by key.
  returned: always
  type: dict
  sample: {cpython-3.12.16-macos-aarch64-none: {sha256: "...", intact: true, prefix: /opt/mlx-fleet/store/python/cpython-3.12.16-macos-aarch64-none/python}}
venv:
  description: The venv at O(path).
  returned: always
  type: dict
  contains:
    exists: {description: Whether its Python runs, type: bool}
    info: {description: "Its Python's version, base prefix, installed distributions and the MLX proof", type: dict}
    home: {description: C(home) from pyvenv.cfg, type: str}
wheels:
  description: Wheels already in the store, file name to sha256.
  returned: always
  type: dict
uv_sha256:
  description: sha256 of the store's uv binary, empty when absent.
  returned: always
  type: str
fingerprint:
  description: The fingerprint file in the venv, or null.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env_state

ARGUMENT_SPEC = mlx_env_state.ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    problem = mlx_env_state.problem(module.params)
    if problem:
        module.fail_json(msg=problem)
    state = mlx_env_state.read(module, module.params)
    # Also as the fact mlx_fleet_env, the one the mlx_env role reads (macos_facts sets it in the preflight).
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_env": state}, **state)


if __name__ == "__main__":
    main()
