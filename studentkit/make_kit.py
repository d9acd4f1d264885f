"""Build the student kit (``make student-kit``): what a student needs to grade their own
adapter, without the answer key.

The kit holds SPEC.md, ``spec/`` (the Protocols), the grader's code that runs the checks
(``properties/``, ``harness/``, ``exhaustive/``: the models and oracles the properties
compare with are not the reference), the adapter template, the **public** rubric (the
rubric's ``visible`` items only), the docs for students, the runtime pins, and a runner,
``grade.py``. It holds **no** ``reference/``, no ``adapters/zoo/``, no hidden rubric
item, no seed (no ``grading.env``; this script takes none). Without ``reference/`` the
same harness runs in its student-kit mode (``harness.names.HAS_REFERENCE``): a property
that would need the reference to stand in for a component the student does not provide
reads "needs the reference" (graded on the autograder, no points here), and no
reproducer script is written. docs/grading.md, "The student kit".

    python studentkit/make_kit.py --out reports/student-kit/mmspec-student-kit.zip \\
        [--rubric rubrics/default.toml]

The zip is byte-for-byte reproducible, like the Gradescope bundle (sorted entries,
fixed timestamps and permissions); every entry lies under ``mmspec-student-kit/``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gradescope.make_bundle import (  # noqa: E402 - needs ROOT
    checkout_files,
    runtime_requirements,
    write_zip,
)
from harness.grading.rubric import Rubric, RubricError, load_rubric  # noqa: E402

#: The folder every entry of the zip lies in.
TOP = "mmspec-student-kit"

#: Taken from the checkout as they are (folders whole, minus caches).
INCLUDED: tuple[str, ...] = (
    "spec",
    "properties",
    "harness",
    "exhaustive",
    "adapters/__init__.py",
    "adapters/template",
    "docs/grading.md",
    "docs/lab_scenarios.md",
)
#: What may never be in the kit: the answer key and the catalogue of the grader's bugs.
FORBIDDEN = re.compile(r"^(reference|adapters/zoo|tests|fuzz|contracts|gradescope)(/|$)")
#: Files of the kit that say where they come from.
_KIT_FILES = ROOT / "studentkit"



def public_rubric(rubric: Rubric, text: str) -> str:
    """The rubric's ``visible`` items as TOML (the same fields, the same order), with
    its capabilities; hidden, ``after_due_date`` and ``after_published`` items left out,
    names and all."""
    data = tomllib.loads(text)
    visible = [item for item in rubric.items if item.visibility == "visible"]
    if not visible:
        raise SystemExit(f"{rubric.source} has no visible item: there is no public rubric")
    lines = [
        "# The public rubric of the student kit: the visible items of the course's rubric",
        f"# ({len(visible)} of {len(rubric.items)} items; written by studentkit/make_kit.py).",
        "# The autograder may grade more items than these.",
        "",
        f"title = {_string(rubric.title)}",
    ]
    capabilities = data.get("capabilities", {})
    if capabilities:
        lines += ["", "[capabilities]"]
        lines += [f"{_key(k)} = {_string(v)}" for k, v in capabilities.items()]
    for item in visible:
        lines += [
            "",
            "[[items]]",
            f"name = {_string(item.name)}",
            f"points = {item.points:g}",
            'visibility = "visible"',
            f"clauses = [{', '.join(_string(c) for c in item.clauses)}]",
        ]
        if item.description:
            lines.append(f"description = {_string(item.description)}")
        if item.capabilities:
            lines.append(
                f"capabilities = [{', '.join(_string(c) for c in sorted(item.capabilities))}]"
            )
    return "\n".join(lines) + "\n"


def _string(value: str) -> str:
    # a JSON string is a TOML basic string (the same escapes)
    return json.dumps(value, ensure_ascii=False)


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


def kit_files(root: Path) -> list[tuple[str, Path]]:
    """(name in the kit, file) for every file taken from the checkout, sorted."""
    files = checkout_files(root, INCLUDED, "the kit")
    files.append(("SPEC.md", root / "spec" / "SPEC.md"))
    files.append(("README.md", root / "studentkit" / "README.md"))
    files.append(("grade.py", root / "studentkit" / "grade.py"))
    return sorted(files)


def _imports_reference(name: str, data: bytes) -> bool:
    """Whether a module of the kit has an import statement of ``reference``."""
    if not name.endswith(".py"):
        return False
    for node in ast.walk(ast.parse(data, filename=name)):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "reference" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "reference":
                return True
    return False


def build(out: Path, *, rubric: str = "rubrics/default.toml", root: Path = ROOT) -> Path:
    """Write the student kit's zip to ``out``; refuse when it would carry the answer key."""
    rubric_path = root / rubric
    try:
        loaded = load_rubric(rubric_path)
    except RubricError as e:
        raise SystemExit(str(e)) from None
    text = rubric_path.read_text(encoding="utf-8")
    version = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    generated = {
        "rubrics/default.toml": public_rubric(loaded, text),
        "requirements.txt": runtime_requirements(root / "requirements.txt"),
        # spec/clauses.py::mmspec_version reads it beside spec/: reports name the release
        "pyproject.toml": (
            "# The mmspec release this student kit was cut from (its reports name it).\n"
            "[project]\n"
            'name = "mmspec-student-kit"\n'
            f'version = "{version["project"]["version"]}"\n'
        ),
    }
    entries = [(name, file.read_bytes()) for name, file in kit_files(root)]
    entries += [(name, body.encode("utf-8")) for name, body in generated.items()]
    hidden = [item.name for item in loaded.items if item.visibility != "visible"]
    problems = [name for name, _ in entries if FORBIDDEN.search(name)]
    problems += [f"{name} imports reference" for name, d in entries if _imports_reference(name, d)]
    problems += [
        f"the public rubric names the hidden item {item!r}"
        for item in hidden
        if item in generated["rubrics/default.toml"]
    ]
    if problems:
        shown = "\n  ".join(problems)
        raise SystemExit(f"the student kit would hand out the answer key:\n  {shown}")
    return write_zip(out, [(f"{TOP}/{name}", data) for name, data in entries],
                     {f"{TOP}/grade.py"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--out", default="reports/student-kit/mmspec-student-kit.zip")
    parser.add_argument(
        "--rubric",
        default="rubrics/default.toml",
        help="the course's rubric; only its visible items go into the kit",
    )
    args = parser.parse_args(argv)
    out = build(Path(args.out), rubric=args.rubric)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1024:.0f} KiB; public rubric from {args.rubric})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
