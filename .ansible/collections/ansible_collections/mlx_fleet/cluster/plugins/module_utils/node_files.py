# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Files the modules keep on a Mac, replaced atomically.

A file is written in full to the module's temporary folder and moved into place with
``module.atomic_move``, so a reader (or a run cut short) sees the old file or the new one,
never half of one. Stdlib only, Python 3.9 compatible: it runs on the Mac's /usr/bin/python3.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import tempfile

__metaclass__ = type


def write_json(module, path, data, mode="0644"):
    """Replace path with data as JSON (sorted keys, a final newline); its folder is created.

    A folder that cannot be created or written fails the module naming the path and the fix.
    """
    folder = os.path.dirname(path)
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
    except OSError as exc:
        module.fail_json(msg="{0}: cannot create its folder ({1}); writing needs root (become: true)".format(
            path, exc.strerror or exc))
    if not os.access(folder, os.W_OK):
        module.fail_json(msg="{0}: its folder is not writable by this user; writing needs root (become: true)"
                         .format(path))
    handle, tmp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(handle, "w") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")
    module.atomic_move(tmp, path)
    module.set_mode_if_different(path, mode, False)
