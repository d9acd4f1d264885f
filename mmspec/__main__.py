"""``python -m mmspec`` and the ``mmspec`` command: ``verify``, ``grade ADAPTER``, ``list``.

Installed from the wheel (``pip install .``), this package holds the checkout's folders
as ``mmspec.spec``, ``mmspec.harness``, ... (docs/architecture.md, "Installed"), and this
runs :mod:`mmspec.harness.cli` from any folder.

In a checkout the folders are the top-level packages ``spec``, ``harness``, ..., and
``mmspec/`` holds only this file and ``__init__.py`` — which is also all that
``pip install -e .`` maps (pyproject.toml). The project's import roots share their names
with unrelated packages on the package index, so they are never put on the environment's
path: this finds the checkout — ``$MMSPEC_HOME``, or else the folder above this one —
and puts it first on *its own process's* ``sys.path`` before running
:mod:`harness.cli`. ``python -m properties`` from the checkout (what ``make`` runs)
remains the way in there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent

#: Whether this is the installed distribution: the wheel carries ``mmspec/harness/``; a
#: checkout's ``mmspec/`` holds only the entry point.
INSTALLED = (_HERE / "harness" / "cli.py").is_file()

_ROOTS = ("spec", "reference", "properties", "harness", "adapters")


def find_checkout() -> Path | None:
    """The mmspec checkout this command runs from, or None."""
    candidates = []
    if os.environ.get("MMSPEC_HOME"):
        candidates.append(Path(os.environ["MMSPEC_HOME"]).expanduser())
    candidates.append(_HERE.parent)
    for candidate in candidates:
        if (candidate / "spec" / "SPEC.md").is_file() and (candidate / "properties").is_dir():
            return candidate.resolve()
    return None


def _enter_checkout() -> int:
    """Put the checkout first on this process's path; 0, or 2 with the reason printed."""
    root = find_checkout()
    if root is None:
        print(
            "mmspec: cannot find the mmspec checkout; install it (`pip install .` from the "
            "checkout), or set MMSPEC_HOME to a checkout",
            file=sys.stderr,
        )
        return 2
    foreign = [
        name
        for name in _ROOTS
        if name in sys.modules
        and not str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(root))
    ]
    if foreign:
        print(
            f"mmspec: {', '.join(foreign)} already imported from elsewhere; run mmspec in a "
            "fresh process",
            file=sys.stderr,
        )
        return 2
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    if not INSTALLED:
        status = _enter_checkout()
        if status:
            return status
    # The wheel's build rewrites this import to mmspec.harness.cli (setup.py).
    from harness.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
