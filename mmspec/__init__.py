"""mmspec: an executable specification of multimodal LLM serving.

Installed (``pip install .``: docs/architecture.md, "Installed"), this one package holds
what a checkout has as top-level folders, under names that clash with nothing:

- ``mmspec.spec``: SPEC.md (package data), the types, typed errors, component Protocols
  and the ``Adapter`` contract an implementation is checked through;
- ``mmspec.reference``: the reference implementation;
- ``mmspec.properties``: the properties and state machines that check the clauses;
- ``mmspec.harness``: runs them against an adapter and reports (``python -m mmspec``);
- ``mmspec.exhaustive``, ``mmspec.contracts``: the exhaustive and CrossHair checkers;
- ``mmspec.adapters``: the adapter template and the torch, vLLM and SGLang adapters.

One adapter serves every copy (issue 33): it imports ``mmspec.spec.adapter``. Installed,
that is the package's own module. A checkout, the student kit and the autograder's bundle
have the folders as top-level packages (``spec``, ``harness``, ...) and this folder holds
only the command line's entry point (``__main__``) and this file, which then answers
``mmspec.<folder>...`` with the top-level module itself — the same object, so the
adapter's classes and errors are the ones the harness checks against (an adapter that
imports ``spec.adapter`` works there too, but not installed). Only the folders of this
copy are answered for: never a package of the same name from elsewhere on the path.
``mmspec.__version__`` is the version every report's first line names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent

#: The copy's folders that are ``mmspec.<folder>`` when installed (setup.py's ``ROOTS``;
#: tests/test_one_namespace.py checks they agree).
FOLDERS = ("spec", "reference", "properties", "harness", "exhaustive", "contracts", "adapters")


class _SameModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``mmspec.<folder>[.more]`` as the top-level module ``<folder>[.more]`` of the copy
    this file lies in (its parent folder): the very module object, not a second copy."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, inner = fullname.partition(".")
        if prefix != __name__ or inner.split(".")[0] not in FOLDERS:
            return None
        top = importlib.util.find_spec(inner.split(".")[0])
        origin = top.submodule_search_locations if top is not None else None
        # the copy's own folder only: a package of the same name elsewhere (a user's
        # ``spec``) is never served as ours
        if not origin or Path(list(origin)[0]).resolve() != _HERE.parent / inner.split(".")[0]:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(spec.name.partition(".")[2])
        # the import system sets ``__spec__`` to this alias's whatever the module had:
        # kept here, and put back by exec_module
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs (the module was imported under its own name); its own
        ``__spec__`` is put back, which later imports of its submodules read."""
        alias = module.__spec__
        if alias is not None and alias.loader is self:
            module.__spec__ = alias.loader_state


def _serve_the_folders() -> None:
    installed = (_HERE / "harness" / "cli.py").is_file()  # the wheel carries the folders
    if not installed and not any(isinstance(f, _SameModules) for f in sys.meta_path):
        sys.meta_path.insert(0, _SameModules())


_serve_the_folders()


def __getattr__(name: str) -> str:
    if name == "__version__":
        from spec.clauses import mmspec_version  # installed: mmspec.spec.clauses

        return mmspec_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
