"""Build the Gradescope autograder zip (``make gradescope-bundle``).

The zip holds, at its root, ``setup.sh`` and ``run_autograder`` (Gradescope's two
required files), the code the grader runs (spec/, reference/,
properties/, harness/, exhaustive/, the student template, the rubrics, pyproject.toml
for the version), ``requirements-autograder.txt`` (the runtime pins of
requirements.txt: the same versions give the same test cases), and ``grading.env``
(profile, seed, rubric and the submission's adapter file name). The zip is
byte-for-byte reproducible: sorted entries, fixed timestamps and permissions.

    python gradescope/make_bundle.py --out reports/gradescope/autograder.zip \\
        [--seed S] [--profile grading] [--rubric rubrics/default.toml] [--adapter-file adapter.py]

A secret seed belongs in the zip only: students never see the zip, and the reports it
writes hide the seed.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.profiles import PROFILES  # noqa: E402 - needs the checkout on sys.path

#: What the autograder needs from the checkout (folders are taken whole, minus caches).
INCLUDED: tuple[str, ...] = (
    "spec",
    "reference",
    "properties",
    "harness",
    "exhaustive",
    "adapters/__init__.py",
    "adapters/template",
    "mmspec/__init__.py",  # ``mmspec.spec`` is ``spec``: one adapter for every copy
    "rubrics",
    "docs/grading.md",
    "README.md",
    "pyproject.toml",  # the version every report names (spec/clauses.py::mmspec_version)
)
#: The runtime dependencies, pinned as in requirements.txt (the rest are dev tools).
RUNTIME_PACKAGES: tuple[str, ...] = ("hypothesis", "numpy")

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIPPED = re.compile(r"(^|/)(__pycache__|\.[^/]*)(/|$)|\.py[co]$")


def runtime_requirements(requirements: Path) -> str:
    """The exact pins of :data:`RUNTIME_PACKAGES` from ``requirements``."""
    pins: dict[str, str] = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if match:
            pins[match.group(1).lower()] = line
    missing = [p for p in RUNTIME_PACKAGES if p not in pins]
    if missing:
        raise SystemExit(f"{requirements} pins no exact version of {', '.join(missing)}")
    return "".join(f"{pins[p]}\n" for p in RUNTIME_PACKAGES)


def grading_env(profile: str, seed: int | None, rubric: str, adapter_file: str) -> str:
    return (
        "# Read by run_autograder (written by gradescope/make_bundle.py).\n"
        f"PROFILE={profile}\n"
        f"SEED={'' if seed is None else seed}\n"
        f"RUBRIC={rubric}\n"
        f"ADAPTER_FILE={adapter_file}\n"
    )


def checkout_files(root: Path, entries: tuple[str, ...], what: str) -> list[tuple[str, Path]]:
    """(name in the archive, file) for every file of ``entries`` (files, or folders taken
    whole minus caches and dotfiles), in order: shared with the student kit
    (studentkit/make_kit.py)."""
    files: list[tuple[str, Path]] = []
    for entry in entries:
        path = root / entry
        if path.is_file():
            files.append((entry, path))
            continue
        if not path.is_dir():
            raise SystemExit(f"{what} needs {entry}, which is missing from {root}")
        for file in sorted(path.rglob("*")):
            name = file.relative_to(root).as_posix()
            if file.is_file() and not _SKIPPED.search(name):
                files.append((name, file))
    return files


def write_zip(out: Path, entries: list[tuple[str, bytes]], executables: set[str]) -> Path:
    """A byte-for-byte reproducible zip: sorted entries, fixed timestamps and modes
    (``executables`` 0755, the rest 0644)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = (0o100755 if name in executables else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out


def bundle_files(root: Path) -> list[tuple[str, Path]]:
    """(name in the zip, file) for every included file, sorted."""
    files = checkout_files(root, INCLUDED, "the bundle")
    files.append(("setup.sh", root / "gradescope" / "setup.sh"))
    files.append(("run_autograder", root / "gradescope" / "run_autograder"))
    return sorted(files)


def build(
    out: Path,
    *,
    profile: str = "grading",
    seed: int | None = None,
    rubric: str = "rubrics/default.toml",
    adapter_file: str = "adapter.py",
    root: Path = ROOT,
) -> Path:
    """Write the autograder zip to ``out``."""
    if profile not in PROFILES:
        raise SystemExit(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if not (root / rubric).is_file():
        raise SystemExit(f"no rubric at {rubric} (relative to {root})")
    generated = {
        "requirements-autograder.txt": runtime_requirements(root / "requirements.txt"),
        "grading.env": grading_env(profile, seed, rubric, adapter_file),
    }
    entries = [(name, file.read_bytes()) for name, file in bundle_files(root)]
    entries += [(name, text.encode("utf-8")) for name, text in generated.items()]
    return write_zip(out, entries, {"setup.sh", "run_autograder"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", default="reports/gradescope/autograder.zip")
    parser.add_argument("--profile", default="grading", choices=PROFILES)
    parser.add_argument("--seed", type=int, help="the instructor's secret seed (default: none)")
    parser.add_argument("--rubric", default="rubrics/default.toml")
    parser.add_argument("--adapter-file", default="adapter.py")
    args = parser.parse_args(argv)
    out = build(
        Path(args.out),
        profile=args.profile,
        seed=args.seed,
        rubric=args.rubric,
        adapter_file=args.adapter_file,
    )
    seed = "no seed" if args.seed is None else "a secret seed"
    print(f"wrote {out} ({args.profile} profile, {seed}, rubric {args.rubric})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
