"""The ``mmspec`` console script: ``mmspec grade ADAPTER``, ``mmspec verify``, ``mmspec list``.

``pip install -e .`` (from the checkout) installs this one module and the ``mmspec``
command; nothing else. The project's import roots (``spec``, ``reference``,
``properties``, ``adapters``) share their names with unrelated packages on PyPI, so they
are never installed (pyproject.toml): this launcher finds the checkout — ``$MMSPEC_HOME``,
or else the folder this file lies in, which an editable install maps to the checkout —
and puts it first on *its own process's* ``sys.path`` before running
:mod:`harness.cli`. Everywhere else ``python -m properties`` from the checkout (what
``make`` runs) remains the way in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

_ROOTS = ("spec", "reference", "properties", "adapters")


def find_checkout() -> Path | None:
    """The mmspec checkout this command runs from, or None."""
    candidates = []
    if os.environ.get("MMSPEC_HOME"):
        candidates.append(Path(os.environ["MMSPEC_HOME"]).expanduser())
    candidates.append(Path(__file__).resolve().parent)
    for candidate in candidates:
        if (candidate / "spec" / "SPEC.md").is_file() and (candidate / "properties").is_dir():
            return candidate.resolve()
    return None


def main(argv: Sequence[str] | None = None) -> int:
    root = find_checkout()
    if root is None:
        print(
            "mmspec: cannot find the mmspec checkout; install with `pip install -e .` from "
            "it, or set MMSPEC_HOME to it",
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
    from harness.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
