"""Isolation: the code under test runs in a child process; the verdict stays here.

Hypothesis, the properties, the models and the report run in the grader's process;
only the adapter runs in a child, and every call to it crosses a socket as plain data
(:mod:`~harness.isolation.wire`), checked against the component's Protocol before any
property compares it (:mod:`~harness.isolation.proxy`). The child runs under a
wall-clock limit per call and per property, a memory limit and a CPU-time limit, and is
replaced when it dies (:mod:`~harness.isolation.supervisor`,
:mod:`~harness.isolation.session`). docs/grading.md, "Isolation", has the threat model.
"""

from harness.isolation.session import IsolatedSession
from harness.isolation.supervisor import Limits

__all__ = ["IsolatedSession", "Limits"]
