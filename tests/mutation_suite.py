"""The test selection ``make mutation`` runs against each mutant of ``reference/``.

One test per registered property: the property runs against the reference, in this
process, under the ``mutation`` profile (derandomized, no database, no shrinking). A
mutant of the reference is killed when some property stops passing on it (FAIL, ERROR
or VACUOUS). One test per property lets mutmut record which properties reach which
reference functions, so each mutant re-runs only the properties that can see it.

The file is not named ``test_*.py``: ``make test`` does not collect it (it is the
reference suite of ``make verify`` under another profile); mutmut passes it explicitly
(``[tool.mutmut] pytest_add_cli_args_test_selection`` in pyproject.toml). Only the
properties are selected, not the reference's unit tests: the score measures the power
of the properties.
"""

from __future__ import annotations

import pytest

from harness.catalog import registered_properties
from harness.report import render
from harness.runner import verify

#: The no-shrink, derandomized profile (harness/profiles.py).
PROFILE = "mutation"


@pytest.mark.parametrize("name", list(registered_properties()))
def test_property_passes_on_the_reference(name: str) -> None:
    report = verify("reference", PROFILE, only=[name])
    assert report.ok, render(report)
