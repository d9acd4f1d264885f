"""The torchvision import shim of the SGLang environment (``.venv-sglang`` only).

SGLang's import chain reaches torchvision without using it: ``sglang/srt/configs/
__init__.py`` imports ``sglang/srt/multimodal/internvl_utils.py``, which runs
``import torchvision.transforms as T`` at module level for InternVL's image transforms.
The package index's torchvision does not load against the CPU torch here ("operator
torchvision::nms does not exist"), and no model's image processing is under test: the
adapter wraps hashing, pad values and the radix key, none of which use torchvision.

So ``import torchvision`` (and any ``torchvision.*``) in SGLang's own modules succeeds
and gives a module whose
every name is a *poisoned* value: fetching a name (what ``from torchvision.x import Y``
does) is allowed, but calling, subclassing, or reading an attribute of a poisoned value
records the touch in :data:`TOUCHES` and raises :class:`TorchvisionShimError`.
tests/test_sglang_adapter.py runs the properties and asserts that :data:`TOUCHES` stays
empty — proof that the code under test never calls into torchvision (a caller that
swallowed the error would still leave its touch recorded).

Installed by ``make .venv-sglang`` as a ``.pth`` file (the shim's directory, then
``import mmspec_torchvision_shim``), so the finder is first on ``sys.meta_path`` in every
process of that environment, and nowhere else. Any other importer finds no torchvision
(transformers, probing for an optional backend, takes its torchvision-free paths).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import NoReturn

#: How reports name the shim.
DESCRIPTION = "torchvision: import shim (every use raises; adapters/sglang/shim)"

#: Every use of a poisoned value, in order (``torchvision.transforms.Compose(...)``).
TOUCHES: list[str] = []


class TorchvisionShimError(RuntimeError):
    """Code called into torchvision, which this environment only shims."""


def _touch(what: str) -> NoReturn:
    TOUCHES.append(what)
    raise TorchvisionShimError(
        f"{what}: torchvision is an import shim in the SGLang environment "
        "(adapters/sglang/shim/mmspec_torchvision_shim.py); nothing may call into it"
    )


class _Poisoned:
    """A name fetched from a shimmed module: any use of it is a touch."""

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> NoReturn:
        _touch(f"{object.__getattribute__(self, '_path')}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        _touch(f"{object.__getattribute__(self, '_path')}(...)")

    def __mro_entries__(self, bases: tuple[object, ...]) -> NoReturn:
        _touch(f"subclassing {object.__getattribute__(self, '_path')}")

    def __repr__(self) -> str:
        return f"<torchvision shim: {object.__getattribute__(self, '_path')}>"


class _ShimModule(types.ModuleType):
    """``torchvision`` or a submodule: names other than dunders are poisoned values."""

    def __getattr__(self, name: str) -> _Poisoned:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Poisoned(f"{self.__name__}.{name}")


class _ShimLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _ShimModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def _importer() -> str:
    """The module whose code asked for the import: the first frame outside the import
    machinery and this shim."""
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not name.startswith(("importlib", "_frozen_importlib", __name__)):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


def _settle_transformers_probe() -> None:
    """Have transformers decide, once and before any shim module exists, that
    torchvision is unavailable: ``is_torchvision_available`` is cached, and probing
    later would find the shim in ``sys.modules``. Its ``find_spec`` comes from
    transformers, not SGLang, so the finder answers None."""
    from transformers.utils import import_utils

    import_utils.is_torchvision_available()


class _ShimFinder(importlib.abc.MetaPathFinder):
    """Serves ``torchvision`` and its submodules to SGLang's own modules only: any other
    importer (transformers probing for an optional backend) finds no torchvision."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torchvision" and not fullname.startswith("torchvision."):
            return None
        if not _importer().startswith("sglang"):
            return None
        if "torchvision" not in sys.modules:
            _settle_transformers_probe()
        return importlib.machinery.ModuleSpec(fullname, _ShimLoader(), is_package=True)


def installed() -> bool:
    """Whether the shim's finder is on ``sys.meta_path`` in this process."""
    return any(isinstance(finder, _ShimFinder) for finder in sys.meta_path)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent)."""
    if not installed():
        sys.meta_path.insert(0, _ShimFinder())


install()
