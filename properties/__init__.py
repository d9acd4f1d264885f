"""The checks of SPEC.md's clauses: Hypothesis strategies, properties, state machines,
the models they compare against, and the vocabulary a property declares its clause with
(:mod:`properties.framework`). Running them against an adapter and reporting is the
harness's job (``harness/``), which imports this package, never the reverse. Properties
never import ``reference/``: they receive implementations through
:class:`properties.framework.Parts`."""
