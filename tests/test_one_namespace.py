"""One adapter serves every copy (issue 33, item 5): it imports ``mmspec.spec``.

Installed, ``mmspec.spec`` is the wheel's own package (tests/test_wheel.py). A checkout,
the student kit and the autograder's bundle hold the folders as top-level packages, and
their ``mmspec/__init__.py`` answers ``mmspec.<folder>`` with the top-level module
itself; the kit and the bundle grade a submission written that way
(tests/test_student_kit.py, tests/test_grading_gradescope.py). Here: it is the same
module object (so an adapter's errors are the classes the grader checks against), and a
package of the same name from elsewhere on the path is never served as ours.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import mmspec
from tests.conftest import ROOT


def _python(code: str, cwd: Path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMSPEC_HOME")}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env={**env, "PYTHONPATH": pythonpath},
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_the_folders_served_are_those_the_wheel_carries() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    roots = next(
        ast.literal_eval(node.value) for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "ROOTS"
    )
    assert mmspec.FOLDERS == roots


def test_mmspec_spec_is_the_checkouts_spec_module_itself(tmp_path: Path) -> None:
    done = _python(
        "import mmspec.spec.errors as a, spec.errors as b\n"
        "import mmspec.harness.names as names, harness.names\n"
        "from mmspec.spec.adapter import Adapter\n"
        "import spec.adapter\n"
        "assert a is b and names is harness.names and Adapter is spec.adapter.Adapter\n"
        "assert names.__name__ == 'harness.names' and names.PREFIX == ''\n"
        "assert b.__spec__.name == 'spec.errors'  # its own spec, for later imports\n"
        "print('same')\n",
        tmp_path, str(ROOT),
    )
    assert done.returncode == 0 and done.stdout == "same\n", done.stderr


def test_a_package_of_the_same_name_elsewhere_is_never_served_as_ours(tmp_path: Path) -> None:
    own = tmp_path / "project"
    (own / "spec").mkdir(parents=True)
    (own / "spec" / "__init__.py").write_text("OURS = False\n", encoding="utf-8")
    done = _python(
        "import spec; assert spec.OURS is False\n"
        "try:\n"
        "    import mmspec.spec\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n",
        own, os.pathsep.join([str(own), str(ROOT)]),
    )
    assert done.returncode == 0 and done.stdout == "No module named 'mmspec.spec'\n", (
        done.stdout + done.stderr
    )
