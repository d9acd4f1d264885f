"""Fetch a vLLM release's Python source: the wheel, unpacked.

``python adapters/vllm/fetch.py 0.22.1 [--cache DIR]`` downloads the release wheel with
``pip download --no-deps vllm==0.22.1`` (pip's ordinary index lookup of one pinned
version) into ``DIR/wheels`` and unpacks its ``vllm/`` tree — vLLM's Python source,
without the compiled extensions, which the adapter does not need — into
``DIR/vllm-0.22.1``. It prints that directory: the value for ``--vllm-src``,
``MMSPEC_VLLM_SRC`` or ``make verify-vllm VLLM_SRC=...``. A tree already unpacked is
reused (the ``.complete`` stamp records the wheel and its sha256).

Only pinned versions are fetched: the caller names the version, never "latest". The
work is ``adapters/release_wheel.py``'s, shared with the other engine.

Run as a script (by path), not as ``adapters.vllm.fetch``: importing the package
``adapters.vllm`` imports vLLM. This module imports nothing but the standard library.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _release_wheel() -> object:
    path = Path(__file__).resolve().parents[1] / "release_wheel.py"
    spec = importlib.util.spec_from_file_location("_mmspec_release_wheel", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


_shared = _release_wheel()
FetchError = _shared.FetchError  # type: ignore[attr-defined]
RELEASES = _shared.ReleaseWheel("vllm", "vLLM", "0.22.1", compiled=True)  # type: ignore[attr-defined]
#: Where trees and wheels go by default (ignored by git).
DEFAULT_CACHE: Path = RELEASES.default_cache
tree_dir = RELEASES.tree_dir
fetch = RELEASES.fetch


def main(argv: list[str] | None = None) -> int:
    return int(RELEASES.main(argv, __doc__))


if __name__ == "__main__":
    raise SystemExit(main())
