"""Build the student kit (``make student-kit``): what a student needs to grade their own
adapter, without the answer key.

The kit holds SPEC.md, ``spec/`` (the Protocols), the grader's code, the adapter
template, the **public** rubric (the rubric's ``visible`` items only), the docs for
students, the runtime pins, and a runner, ``grade.py``. It holds **no** ``reference/``,
no ``adapters/zoo/``, no hidden rubric item, no seed (no ``grading.env``; this script
takes none) — and none of the models and oracles the properties compare with
(:data:`MODELS`: each is a working implementation of what it models), nor any module
that needs one: of ``properties/`` and ``exhaustive/`` only the modules the kit's
harness and its public properties import (:func:`kit_modules`).

So the kit grades the course's **public** items, those whose properties need no part of
the reference; the **hidden** ones (every item a property of which needs the reference)
are graded on the autograder only, and the public rubric marks them
``autograder_only = true`` (:func:`autograder_only`), whether the course's rubric does or
not. Without ``reference/`` the same harness runs in its student-kit mode
(``harness.names.HAS_REFERENCE``): a hidden item reads "needs the reference" (graded on
the autograder, no points here), and so does a property that would need the reference to
stand in for a component the student does not provide; no reproducer script is written.
docs/grading.md, "The student kit" and "Public and hidden items".

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
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gradescope.make_bundle import (  # noqa: E402 - needs ROOT
    checkout_files,
    runtime_requirements,
    write_zip,
)
from harness.catalog import MODULES, registered_properties  # noqa: E402
from harness.grading.rubric import Rubric, RubricError, load_rubric  # noqa: E402
from spec.clauses import load_clauses  # noqa: E402

#: The folder every entry of the zip lies in.
TOP = "mmspec-student-kit"

#: Taken from the checkout as they are (folders whole, minus caches; of ``properties/``
#: and ``exhaustive/`` only :func:`kit_modules`).
INCLUDED: tuple[str, ...] = (
    "spec",
    "properties",
    "harness",
    "exhaustive",
    "adapters/__init__.py",
    "adapters/template",
    "mmspec/__init__.py",  # ``mmspec.spec`` is ``spec``: one adapter for every copy
    "docs/grading.md",
    "docs/lab_scenarios.md",
)
#: The models and oracles the properties compare with: working implementations of the
#: components they model (a 47-line wrapper around the encoder cache model scored 13/13
#: on the eviction and slot-accounting items: issue 33), the reference's other half.
MODELS: tuple[str, ...] = (
    "properties/models",
    "properties/oracles.py",
    "properties/differential.py",  # its numpy oracle of the splice, in every precision
)
#: Folders of which the kit takes only the modules it needs (:func:`kit_modules`).
_PRUNED = ("properties", "exhaustive")
#: What may never be in the kit: the answer key and the catalogue of the grader's bugs.
FORBIDDEN = re.compile(
    r"^(reference|adapters/zoo|tests|fuzz|contracts|gradescope"
    + "".join(f"|{re.escape(m)}" for m in MODELS)
    + r")(/|$)"
)



def public_rubric(rubric: Rubric, text: str, hidden: Iterable[str] = ()) -> str:
    """The rubric's ``visible`` items as TOML (the same fields, the same order), with
    its capabilities; hidden, ``after_due_date`` and ``after_published`` items left out,
    names and all. The items named in ``hidden`` (:func:`autograder_only`) are marked
    ``autograder_only = true``."""
    data = tomllib.loads(text)
    marked = set(hidden)
    visible = [item for item in rubric.items if item.visibility == "visible"]
    if not visible:
        raise SystemExit(f"{rubric.source} has no visible item: there is no public rubric")
    local = [item for item in visible if item.name not in marked]
    lines = [
        "# The public rubric of the student kit: the visible items of the course's rubric",
        f"# ({len(visible)} of {len(rubric.items)} items; written by studentkit/make_kit.py).",
        f"# The kit grades {len(local)} of them (the public items); those marked",
        "# autograder_only = true need the reference, which the kit does not hold: they",
        "# are graded on the autograder only. The autograder may grade more items than",
        "# these.",
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
        if item.name in marked:
            lines.append("autograder_only = true")
    return "\n".join(lines) + "\n"


def _string(value: str) -> str:
    # a JSON string is a TOML basic string (the same escapes)
    return json.dumps(value, ensure_ascii=False)


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


def _module(name: str) -> str:
    """``properties/models/engine.py`` -> ``properties.models.engine`` (a package: its
    ``__init__.py``'s folder)."""
    parts = name.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(tree: ast.Module, modules: Iterable[str], *, at_import: bool) -> set[str]:
    """Our modules ``tree`` imports (``from a import b`` imports ``a.b`` when that is a
    module, and every package above). ``at_import``: only the statements that run when
    it is imported (not in a function, not under ``if TYPE_CHECKING``); else all."""
    known = set(modules)
    found: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if at_import and (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            or (isinstance(node, ast.stmt) and _is_type_checking(node))
        ):
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & known
        todo += ast.iter_child_nodes(node)
    return found


def _closure(graph: Mapping[str, set[str]], roots: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def _graph(files: list[tuple[str, Path]]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports when imported, for every ``.py`` file of
    ``files``."""
    sources = {_module(n): f for n, f in files if n.endswith(".py")}
    return {
        module: _imported(ast.parse(file.read_bytes(), str(file)), sources, at_import=True)
        - {module}
        for module, file in sources.items()
    }


def _is_model(module: str) -> bool:
    return any(
        module == _module(m) or module.startswith(_module(m) + ".") for m in MODELS
    )


def public_property_modules(root: Path = ROOT) -> list[str]:
    """The property modules that need no model (:data:`MODELS`), in catalog order."""
    graph = _graph(checkout_files(root, INCLUDED, "the kit"))
    return [
        f"properties.{m}" for m in MODULES
        if not any(_is_model(d) for d in _closure(graph, [f"properties.{m}"]))
    ]


def kit_modules(root: Path = ROOT) -> set[str]:
    """The modules the kit holds: those of ``spec/``, ``harness/`` and the adapter
    template that need no model; of ``properties/`` and ``exhaustive/``, the public
    property modules, ``properties/__main__`` (``python -m properties``) and what these
    import when imported."""
    files = checkout_files(root, INCLUDED, "the kit")
    graph = _graph(files)
    needs_a_model = {m for m in graph if any(_is_model(d) for d in _closure(graph, [m]))}
    roots = {
        m for m in graph
        if m.split(".")[0] not in _PRUNED and m not in needs_a_model
    }
    roots |= {*public_property_modules(root), "properties.__main__"}
    return _closure(graph, roots)


def needing_the_reference(rubric: Rubric, root: Path = ROOT) -> list[str]:
    """The items a property of which (one SPEC.md names for a clause of the item, or one
    that declares such a clause) is not in a public property module: the hidden tests,
    whatever the rubric marks. In rubric order."""
    public = set(public_property_modules(root))
    registry = registered_properties()
    clauses = load_clauses()
    hidden: list[str] = []
    for item in rubric.items:
        checking = {
            name
            for clause in item.clauses
            for name in (
                *clauses[clause].checked_by,
                *(n for n, spec in registry.items() if clause in spec.clauses),
            )
        }
        if any(name not in registry or registry[name].module not in public for name in checking):
            hidden.append(item.name)
    return hidden


def autograder_only(rubric: Rubric, root: Path = ROOT) -> list[str]:
    """The items the kit does not grade: those :func:`needing_the_reference`, and those
    the rubric marks ``autograder_only``. In rubric order."""
    needing = set(needing_the_reference(rubric, root))
    return [item.name for item in rubric.items if item.autograder_only or item.name in needing]


def kit_files(root: Path) -> list[tuple[str, Path]]:
    """(name in the kit, file) for every file taken from the checkout, sorted."""
    held = kit_modules(root)
    files = [
        (name, file) for name, file in checkout_files(root, INCLUDED, "the kit")
        if not name.endswith(".py") or _module(name) in held
    ]
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


def _dangling(entries: list[tuple[str, bytes]], root: Path) -> list[str]:
    """A module of the kit that imports, when imported, one of the checkout's that the
    kit lacks; or that imports a model anywhere (in a function too)."""
    checkout = {_module(n) for n, _f in checkout_files(root, INCLUDED, "the kit")}
    sources = {_module(n): d for n, d in entries if n.endswith(".py")}
    problems: list[str] = []
    for module, data in sorted(sources.items()):
        tree = ast.parse(data, module)
        lacking = _imported(tree, checkout, at_import=True) - sources.keys()
        problems += [f"{module} imports {m}, which the kit does not hold" for m in sorted(lacking)]
        models = {m for m in _imported(tree, checkout, at_import=False) if _is_model(m)}
        problems += [f"{module} imports the model {m}" for m in sorted(models)]
    return problems


def build(out: Path, *, rubric: str = "rubrics/default.toml", root: Path = ROOT) -> Path:
    """Write the student kit's zip to ``out``; refuse when it would carry the answer key."""
    rubric_path = root / rubric
    try:
        loaded = load_rubric(rubric_path)
    except RubricError as e:
        raise SystemExit(str(e)) from None
    text = rubric_path.read_text(encoding="utf-8")
    version = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    hidden_items = autograder_only(loaded, root)
    generated = {
        "rubrics/default.toml": public_rubric(loaded, text, hidden_items),
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
    problems += _dangling(entries, root)
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
    rubric = load_rubric(ROOT / args.rubric)
    visible = [i for i in rubric.items if i.visibility == "visible"]
    hidden = set(autograder_only(rubric))
    local = [i for i in visible if i.name not in hidden]
    print(f"the kit grades {len(local)} of the {len(visible)} visible items "
          f"({sum(i.points for i in local):g} of {sum(i.points for i in visible):g} points): "
          f"{'; '.join(i.name for i in local) or 'none'}; the others are graded on the "
          "autograder only (autograder_only in the kit's rubric)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
