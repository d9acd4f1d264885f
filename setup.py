"""The build hook of the ``mmspec`` wheel: the checkout's folders under one package.

The checkout keeps its folders as top-level packages (``spec``, ``reference``,
``properties``, ``harness``, ...): ``make`` and pytest run them from the checkout root.
Installed as such, ``spec``, ``reference`` and ``properties`` would clash with unrelated
packages of those names. So the wheel carries each folder as ``mmspec/<folder>/``
(``mmspec.spec``, ``mmspec.harness``, ...), and this hook, when it builds the wheel:

1. copies each folder's modules and package data (``spec/SPEC.md``, the engines'
   declared verdicts, ``rubrics/default.toml``) into ``mmspec/`` in the build tree,
   leaving out what is not handed out (``adapters/zoo/``: the catalogue of the bugs the
   grader looks for) and what runs only in a checkout (the engines' CI scripts);
2. rewrites every import statement of ours — found with :mod:`ast`, so only import
   statements, never strings or docstrings — to its ``mmspec.`` name:
   ``from spec.types import X`` -> ``from mmspec.spec.types import X``, on the same line
   (tracebacks keep their line numbers);
3. refuses to build when a rewritten module still imports one of our roots, or imports
   a folder the wheel does not carry (``fuzz``, ``tests``).

Strings that name our modules at run time (a child's ``python -m ...``, replay lines)
are derived from ``harness/names.py`` instead. An editable install (``pip install -e .``)
does none of this: it maps ``mmspec`` to the checkout's ``mmspec/`` folder, whose
``__main__`` runs the checkout (docs/architecture.md, "Installed").

Everything else (the name, version, dependencies, the ``mmspec`` script) is in
pyproject.toml; this file only adds the build step, and imports as a plain module (the
tests use :func:`rewrite_imports` and :func:`shipped_files`) without building anything.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "mmspec"

#: The checkout's folders the wheel carries, each as ``mmspec.<folder>``.
ROOTS = ("spec", "reference", "properties", "harness", "exhaustive", "contracts", "adapters")

#: Folders of the checkout no wheel carries: a shipped module may not import them.
NOT_SHIPPED_ROOTS = ("fuzz", "tests", "benchmarks", "gradescope")

#: Left out (paths relative to the checkout root; a folder leaves out everything in it):
#: the zoo is the answer key of grading; the CI scripts run the checkout's tests.
LEFT_OUT = ("adapters/zoo", "adapters/vllm/ci.py", "adapters/sglang/ci.py")

#: Files other than modules that the wheel carries (``fnmatch`` patterns, relative to the
#: checkout root), each at ``mmspec/<the same path>``.
DATA = (
    "spec/SPEC.md",  # spec/clauses.py reads it by path
    "adapters/*/expected/*.json",  # the engines' declared verdicts (harness/declared.py)
    "rubrics/default.toml",  # the default rubric (harness/grading/rubric.py)
)

_FROM = re.compile(r"from[ \t]+")


class ImportRewriteError(ValueError):
    """A module's imports cannot be rewritten faithfully, or import what is not shipped."""


def _char_offset(line: str, byte_offset: int) -> int:
    """``ast`` gives column offsets in UTF-8 bytes; the line is a ``str``."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def _root(name: str) -> str:
    return name.split(".")[0]


def _import_statement(name: str, asname: str | None) -> str:
    """One name of an ``import`` statement, as it reads installed (binding the same name)."""
    if _root(name) not in ROOTS:
        return f"import {name}" + (f" as {asname}" if asname else "")
    if asname:
        return f"import {PACKAGE}.{name} as {asname}"
    if "." not in name:
        return f"from {PACKAGE} import {name}"
    # ``import spec.types`` binds ``spec`` with ``types`` loaded in it.
    return f"import {PACKAGE}.{name}; from {PACKAGE} import {_root(name)}"


def rewrite_imports(source: str, filename: str = "<source>") -> str:
    """``source`` with every absolute import of one of :data:`ROOTS` renamed into
    ``mmspec``; the rest of the text, line breaks included, unchanged."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (line index, start, end, replacement)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or not node.module or _root(node.module) not in ROOTS:
                continue
            index = node.lineno - 1
            line = lines[index]
            match = _FROM.match(line, _char_offset(line, node.col_offset))
            start = match.end() if match else -1
            after = line[start + len(node.module) : start + len(node.module) + 1]
            if not match or line[start : start + len(node.module)] != node.module or (
                after.isidentifier() or after == "."
            ):
                raise ImportRewriteError(
                    f"{filename}:{node.lineno}: write `from {node.module} import ...` with "
                    "the module name on the line of `from`"
                )
            edits.append((index, start, start, f"{PACKAGE}."))
        elif isinstance(node, ast.Import):
            if not any(_root(alias.name) in ROOTS for alias in node.names):
                continue
            if node.end_lineno != node.lineno or node.end_col_offset is None:
                raise ImportRewriteError(
                    f"{filename}:{node.lineno}: an `import` of ours must fit on one line"
                )
            index = node.lineno - 1
            line = lines[index]
            start = _char_offset(line, node.col_offset)
            end = _char_offset(line, node.end_col_offset)
            text = "; ".join(_import_statement(a.name, a.asname) for a in node.names)
            edits.append((index, start, end, text))
    for index, start, end, text in sorted(edits, reverse=True):
        lines[index] = lines[index][:start] + text + lines[index][end:]
    rewritten = "".join(lines)
    _check_rewritten(rewritten, filename)
    return rewritten


def _check_rewritten(source: str, filename: str) -> None:
    """No import of a bare root of ours is left, and nothing imports an unshipped folder."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in ROOTS:
                raise ImportRewriteError(f"{filename}:{node.lineno}: {name} left unrewritten")
            if parts[0] in NOT_SHIPPED_ROOTS or (
                parts[0] == PACKAGE and len(parts) > 1 and parts[1] in NOT_SHIPPED_ROOTS
            ):
                raise ImportRewriteError(
                    f"{filename}:{node.lineno}: imports {name}, which the wheel does not carry"
                )


def _left_out(relative: str) -> bool:
    return any(relative == item or relative.startswith(item + "/") for item in LEFT_OUT)


def shipped_files(checkout: Path) -> Iterator[tuple[str, bool]]:
    """(path relative to the checkout, is a module) for every file the wheel carries
    under ``mmspec/`` besides ``mmspec/__init__.py`` and ``mmspec/__main__.py``, sorted."""
    found: set[tuple[str, bool]] = set()
    for root in ROOTS:
        for path in (checkout / root).rglob("*"):
            relative = path.relative_to(checkout).as_posix()
            if not path.is_file() or "__pycache__" in path.parts or _left_out(relative):
                continue
            if path.suffix == ".py":
                found.add((relative, True))
            elif any(fnmatch.fnmatchcase(relative, pattern) for pattern in DATA):
                found.add((relative, False))
    for pattern in DATA:
        if pattern.split("/")[0] not in ROOTS:
            found.update((p.relative_to(checkout).as_posix(), False) for p in
                         checkout.glob(pattern) if p.is_file())
    yield from sorted(found)


def build_package(checkout: Path, target: Path) -> int:
    """Write the shipped files into ``target`` (the build tree's ``mmspec/``), modules
    rewritten; the folders of :data:`ROOTS` there are replaced whole. Returns how many
    files were written."""
    for root in (*ROOTS, "rubrics"):
        shutil.rmtree(target / root, ignore_errors=True)
    count = 0
    for relative, is_module in shipped_files(checkout):
        source, destination = checkout / relative, target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if is_module:
            text = source.read_text(encoding="utf-8")
            destination.write_text(rewrite_imports(text, relative), encoding="utf-8")
        else:
            shutil.copyfile(source, destination)
        count += 1
    for own in ("__init__.py", "__main__.py"):  # the package's own modules, copied already
        path = target / own
        path.write_text(rewrite_imports(path.read_text(encoding="utf-8"), f"mmspec/{own}"),
                        encoding="utf-8")
    return count


if __name__ == "__main__":
    from setuptools import setup
    from setuptools.command.build_py import build_py

    class BuildPy(build_py):
        """``build_py``, then :func:`build_package` into the build tree (not for an
        editable install: that maps ``mmspec`` to the checkout's own folder)."""

        def run(self) -> None:
            super().run()
            if getattr(self, "editable_mode", False):
                return
            checkout = Path(__file__).resolve().parent
            count = build_package(checkout, Path(self.build_lib) / PACKAGE)
            print(f"mmspec: {count} files of the checkout written under {PACKAGE}/")

    setup(cmdclass={"build_py": BuildPy})
