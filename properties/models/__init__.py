"""Trusted models: the simplest structures that obviously meet SPEC.md, written from the
specification alone (never from ``reference/``), against which state machines and
oracles compare the implementation under test."""
