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
    support: full
  diff_mode:
    support: none
  platform:
    platforms: darwin
"""

    # Modules that change a Mac: read first, write only what differs, report it in --diff.
    CHANGES = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: darwin
"""

    # Action plugins that run on the controller only and connect to no host.
    CONTROLLER = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
"""
