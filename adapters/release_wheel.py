"""Fetch an engine release's Python source: the wheel, unpacked (one definition for the
engines whose code runs from a release tree: ``adapters/vllm/fetch.py`` and
``adapters/sglang/fetch.py`` are this module bound to one package).

``fetch(version)`` downloads the release wheel with ``pip download --no-deps
PACKAGE==VERSION`` (pip's ordinary index lookup of one pinned version) into
``CACHE/wheels`` and unpacks its ``PACKAGE/`` tree — the engine's Python source, without
its compiled extensions (``.so``), which nothing here loads — into
``CACHE/PACKAGE-VERSION``. A tree already unpacked is reused; a wheel already downloaded
is not fetched again. Only an exact version is accepted, never "latest".

Where ``compiled`` says so, the tree is compiled to bytecode once, as it is unpacked
(``compileall``, the running interpreter's cache tag): this machine and CI's run with
``PYTHONDONTWRITEBYTECODE=1``, so a tree left as source is compiled anew by every
process that imports it. For vLLM that pays: its job starts about forty (each suite,
each test's child, each reproducer), and importing the adapter took 18.9 CPU s from
0.33.0's source and 12.5 s compiled (0.22.1: 13.7 and 11.8 s), for 7.5 s of compiling a
tree once. For SGLang it does not: its trees are larger (about 17 s each to compile), a
process imports a small part of one (1.5 s saved), and its job starts about six per
release.

Standard library only, loaded by path: importing ``adapters.vllm`` or
``adapters.sglang`` imports the engine, and putting ``adapters/`` on ``sys.path`` would
let ``adapters/vllm`` shadow the real ``vllm``.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

_VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?(post|rc|dev)\d+)?$")
_STAMP = ".complete"
#: The checkout's root: the default caches live there (ignored by git). Installed, this
#: file is ``mmspec/adapters/release_wheel.py`` and ``mmspec/`` is a package (a checkout's
#: root never is): the caches go to the current folder, never into the installed package.
#: (This file runs by path, with the standard library only, so it cannot ask
#: ``harness.names``; the test of the wheel checks both cases.)
ROOT = Path(__file__).resolve().parents[1]
CACHE_ROOT = Path.cwd() if (ROOT / "__init__.py").is_file() else ROOT


class FetchError(RuntimeError):
    """The release could not be downloaded or unpacked."""


@dataclass(frozen=True)
class ReleaseWheel:
    """One engine's release wheels: its package name, how it is called in messages, an
    example version, and where its trees go by default."""

    package: str
    display: str
    example: str
    #: compile the tree to bytecode as it is unpacked (see the module docstring)
    compiled: bool = False

    @property
    def default_cache(self) -> Path:
        return CACHE_ROOT / f".{self.package}-cache"

    def tree_dir(self, version: str, cache: Path | None = None) -> Path:
        return (cache or self.default_cache) / f"{self.package}-{version}"

    def fetch(self, version: str, cache: Path | None = None, quiet: bool = False) -> Path:
        """The unpacked source tree of ``version`` (downloaded when not cached)."""
        if not _VERSION.match(version):
            raise FetchError(
                f"{version!r} is not a pinned {self.display} version (e.g. {self.example})"
            )
        cache = cache or self.default_cache
        tree = self.tree_dir(version, cache)
        if (tree / _STAMP).is_file() and (tree / self.package / "__init__.py").is_file():
            return tree
        wheel = self._download(version, cache / "wheels", quiet)
        self._unpack(wheel, tree)
        return tree

    def _download(self, version: str, wheels: Path, quiet: bool) -> Path:
        pattern = f"{self.package}-{version}-*.whl"
        existing = sorted(wheels.glob(pattern))
        if existing:
            return existing[-1]
        wheels.mkdir(parents=True, exist_ok=True)
        requirement = f"{self.package}=={version}"
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--dest", str(wheels), requirement,
        ]
        if quiet:
            command.insert(4, "--quiet")
        completed = subprocess.run(command, check=False)
        if completed.returncode != 0:
            raise FetchError(f"pip download {requirement} failed (exit {completed.returncode})")
        found = sorted(wheels.glob(pattern))
        if not found:
            raise FetchError(f"pip download {requirement} produced no wheel in {wheels}")
        return found[-1]

    def _unpack(self, wheel: Path, tree: Path) -> None:
        """Extract the wheel's ``PACKAGE/`` entries except compiled extensions, atomically."""
        partial = tree.with_name(tree.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        prefix = f"{self.package}/"
        try:
            with zipfile.ZipFile(wheel) as archive:
                members = [
                    name
                    for name in archive.namelist()
                    if name.startswith(prefix) and not name.endswith((".so", "/"))
                ]
                if f"{prefix}__init__.py" not in members:
                    raise FetchError(f"{wheel} holds no {prefix}__init__.py")
                for name in members:
                    archive.extract(name, partial)
            if self.compiled:
                # Compiled where it will lie (``ddir``), so that tracebacks name the
                # tree; a file this interpreter cannot compile is left as source (only
                # an import of it would fail, as it would have anyway).
                compileall.compile_dir(
                    partial / self.package, ddir=tree / self.package, quiet=2, workers=1
                )
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            (partial / _STAMP).write_text(f"{wheel.name} sha256:{digest}\n")
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        shutil.rmtree(tree, ignore_errors=True)
        partial.rename(tree)

    def main(self, argv: list[str] | None = None, doc: str | None = None) -> int:
        parser = argparse.ArgumentParser(
            prog=f"python adapters/{self.package}/fetch.py", description=doc
        )
        parser.add_argument("version", help=f"a pinned {self.display} release, e.g. {self.example}")
        parser.add_argument("--cache", type=Path, default=self.default_cache)
        args = parser.parse_args(argv)
        try:
            tree = self.fetch(args.version, args.cache, quiet=True)
        except FetchError as e:
            print(f"fetch: {e}", file=sys.stderr)
            return 1
        print(tree)
        return 0
