"""The names our modules have where they run: in the checkout, or installed as ``mmspec.*``.

The checkout's folders are top-level packages (``spec``, ``reference``, ``properties``,
``harness``, ...). The wheel carries the same folders under one package, ``mmspec``
(``spec`` -> ``mmspec.spec``, ...), with every import statement of ours rewritten when it
is built (``setup.py``, docs/architecture.md "Installed"). Import statements need nothing
at run time; what names a module in a *string* — ``python -m ...`` in a child's command
line or a printed replay line, ``importlib.import_module``, a class's ``__module__`` — and
a folder put on ``sys.path`` or ``PYTHONPATH`` must follow the same mapping. It is derived
here, once, from this module's own name, and used wherever such a string is made.
"""

from __future__ import annotations

from pathlib import Path

#: ``""`` in the checkout, ``"mmspec."`` installed: put before a module name of ours.
PREFIX: str = __name__[: -len("harness.names")]
assert PREFIX in ("", "mmspec."), f"harness.names imported as {__name__}"

#: Whether this copy is the installed distribution (``mmspec.harness``).
INSTALLED: bool = bool(PREFIX)

#: The folder holding ``spec/``, ``harness/``, ... : the checkout's root, or the installed
#: ``mmspec/`` package folder (its package data lies where the checkout has the files).
HOME: Path = Path(__file__).resolve().parents[1]

#: The folder from which ``PREFIX + "harness"`` imports: what a child process needs on
#: ``PYTHONPATH``. Installed, it is the folder *holding* ``mmspec/`` — never ``mmspec/``
#: itself, which would make ``spec`` or ``properties`` of ours shadow a user's package.
IMPORT_ROOT: Path = HOME.parent if INSTALLED else HOME

#: The module ``python -m`` runs for our command line: ``properties`` from the checkout
#: (what ``make`` and the docs use), ``mmspec`` installed (from any folder).
MAIN: str = "mmspec" if INSTALLED else "properties"

#: The command a printed replay line starts with.
COMMAND: str = f"python -m {MAIN}"

#: Environment variables that choose which of an adapter's code runs (the vLLM adapter's
#: processor cache pair and model runner, harness/declared.py): a replay line sets those
#: this process has set, so that it runs the same code.
CODE_SELECTING_VARIABLES: tuple[str, ...] = (
    "MMSPEC_VLLM_PROCESSOR_CACHE",
    "MMSPEC_VLLM_MODEL_RUNNER",
)

#: Whether this copy carries the reference implementation. The checkout and the wheel
#: do; the student kit (``make student-kit``, docs/grading.md "The student kit") does not:
#: there, nothing stands in for a component the adapter lacks, and no reproducer gets
#: expected values (harness/loader.py::fallback_for). Judged by the file, not by an
#: import, so that a student's own package named ``reference`` changes nothing. The
#: grading child under a sandbox user may not look (setup.sh hides the reference from
#: it): there the copy has none, as far as that process can tell.
def _has_reference() -> bool:
    try:
        return (HOME / "reference" / "adapter.py").is_file()
    except OSError:
        return False


HAS_REFERENCE: bool = _has_reference()


def module(name: str) -> str:
    """The importable name of our module ``name`` (given as in the checkout:
    ``"reference.adapter"`` -> ``"mmspec.reference.adapter"`` when installed)."""
    return PREFIX + name
