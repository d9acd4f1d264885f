"""Hypothesis strategies, properties, state machines, profiles and the runner that
executes them against an adapter. Properties never import ``reference/``: they receive
implementations through :class:`properties.framework.Parts`."""
