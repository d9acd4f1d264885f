"""The torch adapter: encoder, splice, injection, worker store and batched encoding as
torch tensors on ``cuda`` when available, else the CPU (``$MMSPEC_TORCH_DEVICE``
overrides). It imports nothing from ``reference/`` (a test walks its imports).

torch is an optional dependency, the ``torch`` extra (``make torch`` in a checkout,
``pip install 'mmspec[torch]'`` installed). Without it, importing this package raises
:class:`TorchUnavailableError`, a ``ModuleNotFoundError`` for ``torch`` whose message is
the one line the adapter loader reports: ``torch adapter unavailable: torch is not
installed (make torch)``, or ``(pip install 'mmspec[torch]')`` in the installed
package. Tooling that skips optional adapters can catch ``ModuleNotFoundError`` with
``name == "torch"``.
"""

from __future__ import annotations

from pathlib import Path as _Path


def _install_hint(here: _Path) -> str:
    """How to get torch where the adapter at ``here`` lies: a checkout has the Makefile
    (``make torch`` installs the extra into .venv), the installed package does not."""
    checkout = here.resolve().parents[2]
    return "make torch" if (checkout / "Makefile").is_file() else "pip install 'mmspec[torch]'"


class TorchUnavailableError(ModuleNotFoundError):
    """torch cannot be imported, so neither can this adapter."""


try:
    import torch as _torch  # noqa: F401 - only probing that it imports
except ModuleNotFoundError as _missing:
    if _missing.name != "torch":
        raise
    raise TorchUnavailableError(
        f"torch adapter unavailable: torch is not installed ({_install_hint(_Path(__file__))})",
        name="torch",
    ) from None

from spec.adapter import Adapter  # noqa: E402 - after the probe, on purpose

from .device import DEVICE  # noqa: E402
from .encoder import TorchEncoder  # noqa: E402
from .splice import TorchSplice  # noqa: E402
from .worker import TorchWorkerStore  # noqa: E402

ADAPTER = Adapter(
    name=f"torch ({DEVICE.type})",
    encoder=TorchEncoder,
    splice=TorchSplice,
    worker_store=TorchWorkerStore,
)

__all__ = ["ADAPTER", "DEVICE", "TorchEncoder", "TorchSplice", "TorchUnavailableError"]
