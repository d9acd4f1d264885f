"""The ``pytest11`` entry point (pyproject.toml): the hooks of ``harness/pytest_plugin.py``.

Installed from a wheel, they are ``mmspec.harness.pytest_plugin``'s, and ``pytest
--mmspec-adapter=REF`` works in any test run of that environment. An editable install of
a checkout (``pip install -e .``, as ``make torch`` does) maps only this folder, which has
no ``harness``: then this module registers nothing and pytest runs as it would without
mmspec — in a checkout, load the plugin by name (``pytest -p harness.pytest_plugin``).
"""

from __future__ import annotations

import importlib
from types import ModuleType


def _installed_plugin() -> ModuleType | None:
    try:
        return importlib.import_module("mmspec.harness.pytest_plugin")
    except ModuleNotFoundError as e:
        if e.name in ("mmspec.harness", "mmspec.harness.pytest_plugin"):
            return None  # an editable install of a checkout: nothing to register
        raise


_PLUGIN = _installed_plugin()
if _PLUGIN is not None:
    pytest_addoption = _PLUGIN.pytest_addoption
    pytest_configure = _PLUGIN.pytest_configure
    pytest_collection_modifyitems = _PLUGIN.pytest_collection_modifyitems
    pytest_generate_tests = _PLUGIN.pytest_generate_tests
    mmspec_runs = _PLUGIN.mmspec_runs
