"""Every skipped test says why, and what to do about it (issue 33, item 9): ``make test``
prints the reasons (pytest's ``-rs``), and each skip in tests/ gives one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: pytest's ways to skip, and where each takes its reason: (positional index, keyword).
SKIPS = {"skip": (0, "reason"), "skipif": (None, "reason"), "importorskip": (None, "reason")}


def _reason(call: ast.Call, position: int | None, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _skips_without_reason(source: str) -> list[int]:
    """The lines of ``pytest.skip(...)``, ``pytest.mark.skip(...)``,
    ``pytest.mark.skipif(...)`` and ``pytest.importorskip(...)`` calls that give no
    reason, and of bare ``@pytest.mark.skip`` decorators."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in SKIPS and "pytest" in ast.unparse(node.func.value):
                position, keyword = SKIPS[name]
                if _reason(node, position, keyword) is None:
                    lines.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines += [
                d.lineno for d in node.decorator_list
                if isinstance(d, ast.Attribute) and d.attr in ("skip", "skipif")
            ]
    return lines


def test_the_checker_finds_a_skip_without_a_reason() -> None:
    source = (
        "import pytest\n"
        "@pytest.mark.skip\ndef test_a(): ...\n"
        "@pytest.mark.skipif(True)\ndef test_b(): ...\n"
        "def test_c():\n    pytest.skip()\n"
        "def test_d():\n    pytest.importorskip('torch')\n"
        "@pytest.mark.skipif(True, reason='x: run `make x`')\ndef test_e(): ...\n"
        "def test_f():\n    pytest.skip('x: run `make x`')\n"
    )
    assert _skips_without_reason(source) == [2, 4, 7, 9]


def test_every_skip_in_the_tests_gives_a_reason() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (lines := _skips_without_reason(path.read_text(encoding="utf-8")))
    }
    assert not found, f"skips without a reason (file: lines): {found}"


def test_make_test_prints_why_each_skipped_test_skipped() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    pytest_line = next(line for line in recipe.group(1).splitlines() if "-m pytest" in line)
    assert re.search(r"\s-r\w*s", pytest_line), pytest_line
