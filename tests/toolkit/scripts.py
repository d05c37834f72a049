"""Load a script under hack/ as a module: the tests exercise the code the scripts run."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO_ROOT


def load_script(relative_path: str, name: str) -> ModuleType:
    """Execute REPO_ROOT/relative_path as module `name`, registered in sys.modules
    (dataclasses resolve their annotations through it)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / relative_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
