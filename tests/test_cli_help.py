"""``--help`` says what each exit status means (issue 33, item 8: they were only in the
README), in the README's words, and each status it names is the one the command gives."""

from __future__ import annotations

import re
from pathlib import Path

from harness.cli import VERIFY_EXIT_STATUSES
from harness.grading.cli import GRADE_EXIT_STATUSES
from tests.conftest import ROOT, run_cli


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[`()]", "", text)).strip().lower()


def test_verify_help_ends_with_its_exit_statuses_in_the_readmes_words() -> None:
    shown = run_cli("verify", "--help")
    assert shown.returncode == 0, shown.stderr
    assert _words(shown.stdout).endswith(_words(VERIFY_EXIT_STATUSES))
    readme = _words((ROOT / "README.md").read_text(encoding="utf-8"))
    assert _words(VERIFY_EXIT_STATUSES.removeprefix("exit status: ")) in readme


def test_grade_help_ends_with_its_exit_statuses_as_its_module_says() -> None:
    shown = run_cli("grade", "--help")
    assert shown.returncode == 0, shown.stderr
    assert _words(shown.stdout).endswith(_words(GRADE_EXIT_STATUSES))
    module = (ROOT / "harness" / "grading" / "cli.py").read_text(encoding="utf-8")
    docstring = _words(module.split('"""')[1])
    assert _words(GRADE_EXIT_STATUSES.removeprefix("exit status: ").split(" (")[0]) in docstring


def test_verify_gives_each_exit_status_its_help_names(tmp_path: Path) -> None:
    passed = run_cli("verify", "--only", "SPL-4")
    assert passed.returncode == 0, passed.stdout[-2000:]
    failed = run_cli(
        "verify", "--adapter", "adapters/zoo/spl_broadcast_single_row.py", "--only", "SPL-4"
    )
    assert failed.returncode == 1, failed.stdout[-2000:]
    malformed = tmp_path / "malformed.py"
    malformed.write_text("ADAPTER = 42\n", encoding="utf-8")
    refused = run_cli("verify", "--adapter", str(malformed), "--only", "SPL-4")
    assert refused.returncode == 2, refused.stderr[-2000:]
    wrong = run_cli("verify", "--no-such-option")
    assert wrong.returncode == 2
