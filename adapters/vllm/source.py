"""Where vLLM comes from: an installed ``vllm``, or a source tree named by
``$MMSPEC_VLLM_SRC`` (the CLI's ``--vllm-src``, ``make verify-vllm VLLM_SRC=...``).

A source tree is a git checkout or the unpacked ``vllm/`` tree of a release wheel
(``pip download --no-deps vllm==X`` then unzip): vLLM's own Python code, run unmodified
and without its compiled extension (``vllm._C`` is only warned about at import). The
variable may name the directory that contains ``vllm/`` or the ``vllm/`` package itself.

The tree is put first on ``sys.path`` and, after the import, ``vllm.__file__`` must lie
inside it: a run that silently tested an installed vllm instead of the change under
review would be worse than no run (:class:`VllmSourceError`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: The environment variable naming the source tree (unset: the installed vllm).
SOURCE_ENV = "MMSPEC_VLLM_SRC"

#: vLLM logs platform probes at import (no CUDA, no Triton, no ``vllm._C``): expected on
#: a CPU box, noise in a report. A level the user sets is kept.
_LOG_LEVEL_ENV = "VLLM_LOGGING_LEVEL"

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class VllmUnavailableError(ModuleNotFoundError):
    """vLLM (or a package its import chain needs) cannot be imported. The message is
    the one line the adapter loader reports."""


class VllmSourceError(ImportError):
    """``$MMSPEC_VLLM_SRC`` does not name a vLLM tree, vllm was imported from somewhere
    else, or ``$MMSPEC_VLLM_PROCESSOR_CACHE`` names no pair the adapter knows."""


@dataclass(frozen=True)
class VllmSource:
    """The vLLM under test: its version and where its code was imported from."""

    version: str
    #: ``(major, minor, patch)`` for a release version, ``None`` for anything else
    #: (``dev`` from a git checkout without a build, ``0.23.0rc1``, ``0.22.2.dev3+g...``).
    release: tuple[int, int, int] | None
    #: The directory holding the imported ``vllm`` package.
    package_dir: Path
    #: ``"source"`` (``$MMSPEC_VLLM_SRC``) or ``"installed"``.
    kind: str

    def describe(self) -> str:
        where = f"source tree {self.package_dir.parent}" if self.kind == "source" else "installed"
        return f"vllm {self.version} ({where})"


def parse_release(version: str) -> tuple[int, int, int] | None:
    """``"0.22.1"`` -> ``(0, 22, 1)``; anything but a plain release -> ``None``."""
    match = _RELEASE.match(version.strip())
    if match is None:
        return None
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def source_root(path: str | os.PathLike[str]) -> Path:
    """The directory to put on ``sys.path`` for the tree at ``path`` (which may be the
    checkout/unpacked root or the ``vllm`` package directory itself)."""
    given = Path(path).expanduser().resolve()
    if (given / "vllm" / "__init__.py").is_file():
        return given
    if given.name == "vllm" and (given / "__init__.py").is_file():
        return given.parent
    raise VllmSourceError(
        f"{SOURCE_ENV}={path}: neither {given}/vllm/__init__.py nor {given}/__init__.py "
        "exists; give a vLLM git checkout, an unpacked release wheel, or its vllm/ directory"
    )


def load_vllm() -> tuple[ModuleType, VllmSource]:
    """Import vllm from ``$MMSPEC_VLLM_SRC`` when set, else the installed one."""
    os.environ.setdefault(_LOG_LEVEL_ENV, "CRITICAL")
    raw = os.environ.get(SOURCE_ENV, "").strip()
    root = source_root(raw) if raw else None
    if root is not None:
        _check_not_imported_elsewhere(root)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
    try:
        vllm = importlib.import_module("vllm")
    except ModuleNotFoundError as e:
        missing = e.name or "?"
        if missing == "vllm":
            raise VllmUnavailableError(
                "vllm adapter unavailable: vllm is not installed; set "
                f"{SOURCE_ENV}=<vLLM source tree> (make verify-vllm VLLM_SRC=... or VLLM=X.Y.Z)",
                name="vllm",
            ) from None
        raise VllmUnavailableError(
            f"vllm adapter unavailable: vLLM's import chain needs {missing!r}, which is not "
            "installed (pip install --no-deps -r adapters/vllm/requirements-vllm.txt)",
            name=missing,
        ) from e
    package_dir = Path(vllm.__file__ or "").resolve().parent
    if root is not None and not package_dir.is_relative_to(root):
        raise VllmSourceError(
            f"{SOURCE_ENV}={raw}, but vllm was imported from {package_dir} "
            f"(another vllm was already imported, or {root} is shadowed on sys.path)"
        )
    version = str(getattr(vllm, "__version__", "unknown"))
    return vllm, VllmSource(
        version=version,
        release=parse_release(version),
        package_dir=package_dir,
        kind="source" if root is not None else "installed",
    )


def _check_not_imported_elsewhere(root: Path) -> None:
    loaded = sys.modules.get("vllm")
    if loaded is None:
        return
    where = Path(getattr(loaded, "__file__", "") or "").resolve().parent
    if not where.is_relative_to(root):
        raise VllmSourceError(
            f"vllm is already imported from {where}; a second tree ({root}) cannot be "
            "loaded into the same process (run each tree in its own process)"
        )
