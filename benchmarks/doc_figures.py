"""Figures the docs state that a script computes, checked or rewritten in place (issue 32,
item 7: a figure typed by hand goes stale while the text around it still reads true).

    PYTHONPATH=. .venv/bin/python benchmarks/doc_figures.py [--check]

Without ``--check`` it rewrites each figure in its document; with it, it prints every
figure that differs and exits 1 (``tests/test_doc_figures.py`` runs the check).

- docs/vllm.md, "Exit status": the defects each pinned vLLM release exits 1 for — the
  findings of class ``defect`` its declaration (``adapters/vllm/expected/<version>.json``)
  gives its rows, which is what ``verify --vllm VERSION`` reports as standing
  (:mod:`harness.declared`);
- docs/vllm.md, "--baseline": the rows ``verify --vllm 0.33.0 --baseline 0.22.1`` prints,
  as the two declarations imply (each release's CI job holds every row to its
  declaration; a row neither declares is ``pass`` or ``not provided`` in both, taken as
  ``pass`` here);
- docs/grading.md, "The student kit": the size of the zip ``make student-kit`` writes
  with the default rubric (to the nearest 10 KB; the check allows 10 %) and its number of
  files (exact).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.baseline import SavedRow, SavedVerdicts, render_differences  # noqa: E402
from harness.catalog import registered_properties  # noqa: E402
from harness.declared import EXPECTED_DIR, Declaration, load_declaration  # noqa: E402
from harness.runner import plan  # noqa: E402
from spec.clauses import load_clauses  # noqa: E402

VLLM_DOC = ROOT / "docs" / "vllm.md"
GRADING_DOC = ROOT / "docs" / "grading.md"
#: The baseline and the release under test of docs/vllm.md's ``--baseline`` example.
BASELINE, UNDER_TEST = "0.22.1", "0.33.0"


@dataclass(frozen=True)
class Figure:
    """One figure: where it stands in its document, and what it should say."""

    name: str
    doc: Path
    #: Finds the figure's text in the document (group ``figure``).
    where: re.Pattern[str]
    #: The text it should be.
    compute: Callable[[], str]
    #: Whether the document's text is right (default: equal, whitespace aside).
    agrees: Callable[[str, str], bool] | None = None

    def found(self) -> str:
        match = self.where.search(self.doc.read_text(encoding="utf-8"))
        if match is None:
            raise LookupError(f"{_shown(self.doc)}: {self.name} not found "
                              f"({self.where.pattern!r})")
        return match["figure"]

    def problem(self) -> str | None:
        """What is wrong with the figure in the document (None: it is right)."""
        shown, computed = self.found(), self.compute()
        same = self.agrees or (lambda a, b: _words(a) == _words(b))
        if same(shown, computed):
            return None
        return (f"{_shown(self.doc)}, {self.name}: it says\n  {_words(shown)}\n"
                f"the script computes\n  {_words(computed)}")

    def write(self) -> bool:
        """Rewrite the figure in its document; whether anything changed."""
        if self.problem() is None:
            return False
        text = self.doc.read_text(encoding="utf-8")
        match = self.where.search(text)
        assert match is not None
        start, end = match.span("figure")
        self.doc.write_text(text[:start] + self.compute() + text[end:], encoding="utf-8")
        return True


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _words(text: str) -> str:
    return " ".join(text.split())


# --- docs/vllm.md --------------------------------------------------------------------------


def declared_versions() -> list[str]:
    """The pinned releases, newest first."""
    versions = [p.stem for p in EXPECTED_DIR.glob("*.json")]
    return sorted(versions, key=lambda v: tuple(int(n) for n in v.split(".")), reverse=True)


def _declaration(version: str) -> Declaration:
    declaration = load_declaration(version)
    if declaration is None:
        raise LookupError(f"no declaration for vLLM {version} in {EXPECTED_DIR}")
    return declaration


def declared_defects(version: str) -> list[str]:
    """The findings of class ``defect`` on the release's declared rows, in number order."""
    declaration = _declaration(version)
    found = {
        finding
        for _verdict, finding in declaration.rows.values()
        if declaration.findings[finding][0] == "defect"
    }
    return sorted(found, key=lambda f: int(f.lstrip("V")))


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def exit_status_sentence() -> str:
    """docs/vllm.md's sentence on what each pinned release exits with."""
    parts = []
    for version in declared_versions():
        defects = declared_defects(version)
        parts.append(
            f"{version} exits 1 for its defects {_listed(defects)}" if defects
            else f"{version} exits 0 (hazards only)"
        )
    return f"Today {', and '.join(parts)}"


def _saved(version: str) -> SavedVerdicts:
    """The verdicts the release's declaration implies for every row of a full run."""
    declaration = _declaration(version)
    rows = tuple(
        SavedRow(clause, name, declaration.rows.get((clause, name), ("pass", ""))[0])
        for clause, name in plan(load_clauses(), registered_properties())
        if name is not None
    )
    return SavedVerdicts(f"vllm {version}", "ci", {}, rows)


def baseline_table() -> str:
    """The rows ``verify --vllm 0.33.0 --baseline 0.22.1`` prints, from the table on."""
    text = render_differences(_saved(BASELINE), _saved(UNDER_TEST))
    return text[text.index("clause  ") :].rstrip("\n") + "\n"


# --- docs/grading.md -----------------------------------------------------------------------


def student_kit() -> tuple[int, int]:
    """The size in bytes and the number of files of the kit ``make student-kit`` writes."""
    from studentkit import make_kit

    with tempfile.TemporaryDirectory() as folder:
        kit = make_kit.build(Path(folder) / "kit.zip")
        with zipfile.ZipFile(kit) as archive:
            files = sum(1 for info in archive.infolist() if not info.is_dir())
        return kit.stat().st_size, files


def kit_figure() -> str:
    size, files = student_kit()
    return f"about {round(size / 10_000) * 10} KB, {files} files"


_KIT = re.compile(r"about (\d+) KB, (\d+) files")


def kit_agrees(shown: str, computed: str) -> bool:
    """The file count exact, the size within 10 % (it moves with every commit)."""
    said, right = _KIT.fullmatch(_words(shown)), _KIT.fullmatch(_words(computed))
    if said is None or right is None:
        return False
    return said[2] == right[2] and abs(int(said[1]) - int(right[1])) <= int(right[1]) / 10


FIGURES: tuple[Figure, ...] = (
    Figure(
        "the defects each pinned release exits 1 for",
        VLLM_DOC,
        re.compile(r"(?P<figure>Today \d+\.\d+\.\d+\s+exits\s.*?)(?=\s+\(the declarations'\s)",
                   re.DOTALL),
        exit_status_sentence,
    ),
    Figure(
        f"the rows --baseline {BASELINE} prints for {UNDER_TEST}",
        VLLM_DOC,
        re.compile(r"```\n(?P<figure>clause  property .*?\n)```", re.DOTALL),
        baseline_table,
    ),
    Figure(
        "the student kit's size and file count",
        GRADING_DOC,
        re.compile(r"writes a zip \((?P<figure>about \d+ KB,\s+\d+ files)"),
        kit_figure,
        kit_agrees,
    ),
)


def problems() -> list[str]:
    """Every figure that differs from what the script computes."""
    return [p for figure in FIGURES if (p := figure.problem()) is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true",
                        help="print the figures that differ and exit 1; change nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        for problem in found:
            print(problem)
        return 1 if found else 0
    for figure in FIGURES:
        if figure.write():
            print(f"rewrote {_shown(figure.doc)}: {figure.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
