"""Replay lines that work pasted into any shell, in any folder (issue 33, item 3).

A failure's replay line names the interpreter that ran (not ``python``, which may be
another one or none), puts on ``PYTHONPATH`` the folders this process imports from that
a fresh interpreter would not find (the checkout, the adapter's own project, what pytest
added), and gives an adapter path as an absolute path. Its one-example form adds
``--replay VERSION:BLOB``: the ``@reproduce_failure`` blob of the shrunk counterexample,
so that the one failing test case runs again, not the whole search.
"""

from __future__ import annotations

import base64
import binascii
import os
import shlex
import sys
from pathlib import Path

from harness.grading.counterexample import parse_blob
from harness.loader import names_a_path
from harness.names import CODE_SELECTING_VARIABLES, IMPORT_ROOT, INSTALLED, MAIN


def invocation() -> str:
    """``PYTHONPATH=... /path/to/python -m properties``: our command line as this
    process would start it again, from any folder, with the variables that chose the
    code it runs (:data:`~harness.names.CODE_SELECTING_VARIABLES`) as they are set."""
    folders: list[str] = [] if INSTALLED else [str(IMPORT_ROOT)]
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        if folder not in folders and os.path.isdir(folder) and not _interpreters(folder):
            folders.append(folder)
    path = f"PYTHONPATH={shlex.quote(os.pathsep.join(folders))} " if folders else ""
    chosen = "".join(
        f"{variable}={shlex.quote(value)} "
        for variable in CODE_SELECTING_VARIABLES
        if (value := os.environ.get(variable, ""))
    )
    return f"{chosen}{path}{shlex.quote(sys.executable)} -m {MAIN}"


def _interpreters(folder: str) -> bool:
    """Whether a fresh interpreter finds ``folder`` by itself (its standard library and
    site-packages lie under its prefixes)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return any(Path(folder).is_relative_to(prefix) for prefix in prefixes if prefix)


def adapter_argument(ref: str) -> str:
    """``ref`` as a replay line gives it: a path made absolute, a module name as typed
    (its folder is on the line's ``PYTHONPATH``)."""
    return os.path.abspath(ref) if names_a_path(ref) else ref


def blob_argument(reproduce: str | None) -> str | None:
    """``VERSION:BLOB`` for ``--replay``, from a printed ``@reproduce_failure(...)``."""
    parsed = parse_blob(reproduce)
    if parsed is None:
        return None
    version, blob = parsed  # the blob Hypothesis prints is base64 text already
    try:
        return f"{version}:{blob.decode('ascii')}"
    except UnicodeDecodeError:
        return None


class ReplayBlobError(ValueError):
    """A ``--replay`` argument that is no reproduce blob."""


def parse_replay(text: str) -> tuple[str, bytes]:
    """``(version, blob)`` from ``VERSION:BLOB`` or a whole ``@reproduce_failure(...)``."""
    parsed = parse_blob(text)
    if parsed is not None:
        return parsed
    version, colon, encoded = text.strip().partition(":")
    if colon and version and encoded:
        try:
            base64.b64decode(encoded, validate=True)  # Hypothesis decodes it: base64 text
            return version, encoded.encode("ascii")
        except (binascii.Error, ValueError):
            pass
    raise ReplayBlobError(
        f"--replay {text!r}: not a reproduce blob (give VERSION:BLOB as a replay line prints "
        "it, or the whole @reproduce_failure('VERSION', b'BLOB') of a report)"
    )
