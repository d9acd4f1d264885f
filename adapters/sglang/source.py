"""Where SGLang comes from: the source tree named by ``$MMSPEC_SGLANG_SRC`` (``make
verify-sglang SGLANG_SRC=...``, or ``SGLANG=X`` which fetches and unpacks the release
wheel first: adapters/sglang/fetch.py), or an installed ``sglang``.

The tree is put first on ``sys.path`` and, after the import, ``sglang.__file__`` must lie
inside it, as for vLLM (:mod:`adapters.vllm.source`): a run that silently tested another
sglang would be worse than no run. The torchvision import shim must be installed in the
process (``.venv-sglang``'s ``.pth`` file): without it SGLang's import chain stops at the
package index's torchvision, and with a real torchvision the run would not be the one
the report header names.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: The environment variable naming the source tree (unset: the installed sglang).
SOURCE_ENV = "MMSPEC_SGLANG_SRC"


class SglangUnavailableError(ModuleNotFoundError):
    """SGLang, a package its import chain needs, or the torchvision shim is missing. The
    message is the one line the adapter loader reports."""


class SglangSourceError(ImportError):
    """``$MMSPEC_SGLANG_SRC`` names no SGLang tree, or sglang came from elsewhere."""


@dataclass(frozen=True)
class SglangSource:
    """The SGLang under test: its version, where its code came from, and the shim."""

    version: str
    package_dir: Path
    #: ``"source"`` (``$MMSPEC_SGLANG_SRC``) or ``"installed"``.
    kind: str
    #: How the torchvision stand-in is named in the report header.
    torchvision: str

    def describe(self) -> str:
        where = f"source tree {self.package_dir.parent}" if self.kind == "source" else "installed"
        return f"sglang {self.version} ({where}; {self.torchvision})"


def source_root(path: str) -> Path:
    """The directory to put on ``sys.path``: the unpacked root, a checkout's
    ``python/`` directory, or the ``sglang`` package directory itself."""
    given = Path(path).expanduser().resolve()
    for root in (given, given / "python"):
        if (root / "sglang" / "__init__.py").is_file():
            return root
    if given.name == "sglang" and (given / "__init__.py").is_file():
        return given.parent
    raise SglangSourceError(
        f"{SOURCE_ENV}={path}: no sglang/__init__.py under {given} or {given}/python; give "
        "an unpacked release wheel (adapters/sglang/fetch.py), a checkout, or its sglang/"
    )


def _torchvision_shim() -> str:
    try:
        shim = importlib.import_module("mmspec_torchvision_shim")
    except ModuleNotFoundError:
        shim = None
    if shim is None or not shim.installed():
        raise SglangUnavailableError(
            "sglang adapter unavailable: the torchvision import shim is not installed in "
            "this environment (run under .venv-sglang: make .venv-sglang)",
            name="mmspec_torchvision_shim",
        )
    return str(shim.DESCRIPTION)


def load_sglang() -> tuple[ModuleType, SglangSource]:
    """Import sglang from ``$MMSPEC_SGLANG_SRC`` when set, else the installed one."""
    torchvision = _torchvision_shim()
    raw = os.environ.get(SOURCE_ENV, "").strip()
    root = source_root(raw) if raw else None
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        sglang = importlib.import_module("sglang")
    except ModuleNotFoundError as e:
        missing = e.name or "?"
        hint = (
            f"set {SOURCE_ENV}=<SGLang tree> (make verify-sglang SGLANG=X.Y.Z)"
            if missing == "sglang"
            else "pip install --no-deps -r adapters/sglang/requirements-sglang.txt"
        )
        raise SglangUnavailableError(
            f"sglang adapter unavailable: No module named {missing!r} ({hint})", name=missing
        ) from e
    package_dir = Path(sglang.__file__ or "").resolve().parent
    if root is not None and not package_dir.is_relative_to(root):
        raise SglangSourceError(
            f"{SOURCE_ENV}={raw}, but sglang was imported from {package_dir}"
        )
    version = str(getattr(sglang, "__version__", "unknown"))
    kind = "source" if root is not None else "installed"
    return sglang, SglangSource(version, package_dir, kind, torchvision)
