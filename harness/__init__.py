"""The harness: runs any clause's properties against any adapter and reports.

It loads adapters (``loader``), runs the registered properties of ``properties/`` under a
Hypothesis profile (``runner``, ``profiles``), isolates untrusted code in a child process
(``isolation/``), grades against a rubric and writes reproducers (``grading/``), compares
reports with baselines and declared engine verdicts (``baseline``, ``declared``), and
measures the suite's power (``kill_matrix``, ``zoo``, ``sweep``). It depends on
``properties/``, ``spec/`` and ``reference/``; nothing in ``properties/`` imports it
(``tests/test_architecture.py``). See docs/architecture.md.
"""
