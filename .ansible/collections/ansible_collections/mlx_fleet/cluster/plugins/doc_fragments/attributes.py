# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Shared attribute documentation for the collection's modules and action plugins."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options: {}
"""

    # Read-only modules that run on a Mac.
    FACTS = r"""
options: {}
attributes:
  check_mode:
    description: Runs in check mode, where it reads exactly as in a normal run.
    support: full
  diff_mode:
    description: Changes nothing, so it has no diff to report.
    support: none
  platform:
    description: The operating systems it runs on.
    support: full
    platforms: darwin
"""

    # Modules that change a Mac: read first, write only what differs, report it in --diff.
    CHANGES = r"""
options: {}
attributes:
  check_mode:
    description: In check mode it reads the Mac, writes nothing, and returns what it would change with C(changed).
    support: full
  diff_mode:
    description: In diff mode it returns the state before and after, for what it changes (or would change in check mode).
    support: full
  platform:
    description: The operating systems it runs on.
    support: full
    platforms: darwin
"""

    # Action plugins that run on the controller only and connect to no host.
    CONTROLLER = r"""
options: {}
attributes:
  action:
    description: Runs as an action plugin on the controller; no module is sent to the hosts.
    support: full
  check_mode:
    description: In check mode it judges as in a normal run and writes no file.
    support: full
  diff_mode:
    description: It returns no diff.
    support: none
  platform:
    description: Runs on the controller, whatever the hosts' operating systems.
    support: full
    platforms: all
"""
