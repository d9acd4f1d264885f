"""Fetch an SGLang release's Python source: the wheel, unpacked.

``python adapters/sglang/fetch.py 0.5.23 [--cache DIR]`` downloads the release wheel with
``pip download --no-deps sglang==0.5.23`` (pip's ordinary index lookup of one pinned
version) into ``DIR/wheels`` and unpacks its ``sglang/`` tree — SGLang's Python source,
without the compiled extensions, which the adapter does not need — into
``DIR/sglang-0.5.23``. It prints that directory: the value for ``--sglang-src``,
``MMSPEC_SGLANG_SRC`` or ``make verify-sglang SGLANG_SRC=...``. A tree already unpacked is
reused (the ``.complete`` stamp records the wheel and its sha256).

Only pinned versions are fetched: the caller names the version, never "latest".

Run as a script (by path), not as ``adapters.sglang.fetch``: importing the package
``adapters.sglang`` imports SGLang. This module imports nothing but the standard library.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

#: Where trees and wheels go by default (ignored by git).
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".sglang-cache"

_VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?(post|rc|dev)\d+)?$")
_STAMP = ".complete"


class FetchError(RuntimeError):
    """The release could not be downloaded or unpacked."""


def tree_dir(version: str, cache: Path = DEFAULT_CACHE) -> Path:
    return cache / f"sglang-{version}"


def fetch(version: str, cache: Path = DEFAULT_CACHE, quiet: bool = False) -> Path:
    """The unpacked source tree of SGLang ``version`` (downloaded when not cached)."""
    if not _VERSION.match(version):
        raise FetchError(f"{version!r} is not a pinned SGLang version (e.g. 0.5.23)")
    tree = tree_dir(version, cache)
    if (tree / _STAMP).is_file() and (tree / "sglang" / "__init__.py").is_file():
        return tree
    wheel = _download(version, cache / "wheels", quiet)
    _unpack(wheel, tree)
    return tree


def _download(version: str, wheels: Path, quiet: bool) -> Path:
    existing = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if existing:
        return existing[-1]
    wheels.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--dest", str(wheels), f"sglang=={version}",
    ]
    if quiet:
        command.insert(4, "--quiet")
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        raise FetchError(f"pip download sglang=={version} failed (exit {completed.returncode})")
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise FetchError(f"pip download sglang=={version} produced no wheel in {wheels}")
    return found[-1]


def _unpack(wheel: Path, tree: Path) -> None:
    """Extract the wheel's ``sglang/`` entries except compiled extensions, atomically."""
    partial = tree.with_name(tree.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                name
                for name in archive.namelist()
                if name.startswith("sglang/") and not name.endswith((".so", "/"))
            ]
            if "sglang/__init__.py" not in members:
                raise FetchError(f"{wheel} holds no sglang/__init__.py")
            for name in members:
                archive.extract(name, partial)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (partial / _STAMP).write_text(f"{wheel.name} sha256:{digest}\n")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(tree, ignore_errors=True)
    partial.rename(tree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python adapters/sglang/fetch.py", description=__doc__)
    parser.add_argument("version", help="a pinned SGLang release, e.g. 0.5.23")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    try:
        tree = fetch(args.version, args.cache, quiet=True)
    except FetchError as e:
        print(f"fetch: {e}", file=sys.stderr)
        return 1
    print(tree)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
