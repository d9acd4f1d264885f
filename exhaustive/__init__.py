"""Exhaustive small-scope checking: every reachable state, every invariant, a verdict.

Hypothesis samples programs; this package enumerates them. A breadth-first search
drives the *same* state machines the properties run under Hypothesis
(:mod:`properties.encoder_cache_machine`, :mod:`properties.engine_machine`) through
every sequence of operations within a fixed scope (SPEC.md "## Exhaustive scopes"), so
every step is checked by the very code that checks it there: the implementation and
the model in lockstep, every invariant after every operation. States are deduplicated
on the model's state plus the implementation's observable state, so the search ends;
breadth-first order makes the first violation found one with the shortest path.

* :mod:`.search` — the breadth-first search over any machine (scope-agnostic);
* :mod:`.ecm` — the encoder cache manager's scope and operations (ECM-1..9);
* :mod:`.engine` — the engine loop's scope and operations (SYS-1..10);
* :mod:`.check` — running both against an adapter, the printed report, and the
  deterministic grading mode (``--exhaustive``);
* :mod:`.options` — the command line's ``--exhaustive`` and ``--clone``.
"""
