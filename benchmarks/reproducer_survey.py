"""Do the grader's reproducers reproduce? Every zoo entry, graded isolated on the property
that kills it, with every reproducer it writes run against it (issue 19).

    PYTHONPATH=. .venv/bin/python benchmarks/reproducer_survey.py [ENTRY ...]

Prints, per entry, its score and, per failure, ``OK`` (the script ended in REPRODUCED),
``NO`` (it did not: what it did instead) or ``NOREPRO`` (no script was written, and why),
then the totals. Entries whose optional dependency is missing (the torch ones without
`make torch`) are skipped and named. Slow: about 25 minutes on two cores for the whole
zoo; not part of `make test` (tests/test_grading_reproducer_verified.py samples it).
"""

from __future__ import annotations

import sys
import time

from harness.grading.grade import grade
from harness.grading.rubric import load_rubric
from harness.isolation import Limits
from harness.zoo import discover


def main(names: list[str]) -> int:
    rubric = load_rubric(None)
    counts = {"OK": 0, "NO": 0, "NOREPRO": 0}
    skipped = []
    for entry in discover():
        if names and entry.short_name not in names:
            continue
        if entry.needs:
            skipped.append(entry.short_name)
            continue
        started = time.perf_counter()
        report = grade(entry.module, rubric, "ci", only=(entry.killed_by,), isolation=Limits())
        took = time.perf_counter() - started
        print(f"{entry.short_name} {entry.killed_by} {report.score:g}/{report.max_score:g} "
              f"{took:.0f}s", flush=True)
        for failure in (f for item in report.items for f in item.failures):
            reproducer = failure.reproducer
            if reproducer is None:
                counts["NOREPRO"] += 1
                print(f"  NOREPRO {failure.clause}: {failure.reproducer_note}", flush=True)
                continue
            verification = reproducer.verification
            kind = "OK" if verification is not None and verification.reproduces else "NO"
            counts[kind] += 1
            detail = verification.detail.splitlines()[0] if verification else "not run"
            print(f"  {kind} {failure.clause}: {detail[:160]}", flush=True)
    total = sum(counts.values())
    print(f"\n{counts['OK']} of {total} reproducers ended in REPRODUCED; {counts['NO']} did "
          f"not; {counts['NOREPRO']} not written" + (f"; skipped {', '.join(skipped)}" if
                                                     skipped else ""))
    return 0 if counts["OK"] == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
