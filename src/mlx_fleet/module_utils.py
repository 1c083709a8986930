"""The collection's module_utils (macOS command registry and parsers) for controller-side code.

They live in the collection (plugins/module_utils/) because modules run them on the Macs;
the controller uses the very same code. Imported through the collection when it is
installed (``ansible_collections.mlx_fleet.cluster``), otherwise from the clone this
package sits in (src/mlx_fleet -> repository root).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_COLLECTION = "ansible_collections.mlx_fleet.cluster.plugins.module_utils"
_CLONE = Path(__file__).resolve().parents[2] / "plugins" / "module_utils"


def load(name: str) -> ModuleType:
    """``load("macos_parsers")`` -> the module."""
    try:
        return importlib.import_module(f"{_COLLECTION}.{name}")
    except ImportError:
        pass
    qualified = f"mlx_fleet._module_utils.{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    path = _CLONE / f"{name}.py"
    if not path.exists():
        raise ImportError(f"cannot find the collection's module_utils/{name}.py "
                          f"(install the mlx_fleet.cluster collection or run from a clone)")
    spec = importlib.util.spec_from_file_location(qualified, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module
