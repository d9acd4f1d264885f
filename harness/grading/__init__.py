"""Grading: a rubric over SPEC.md's clauses, scores per rubric item, reports for the
platforms instructors use, and a standalone reproducer for every failure.

The runner (:mod:`harness.runner`) stays the engine: :func:`grade` runs the
properties that the rubric's clauses need, maps each clause verdict onto the rubric's
items, and, for each failure, replays the minimal failing test case once more with the
components wrapped in recorders (:mod:`harness.grading.recording`) to turn it into a
script of plain calls (:mod:`harness.grading.reproducer`).
"""
