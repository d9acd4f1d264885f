"""mmspec: an executable specification of multimodal LLM serving.

Installed (``pip install .``: docs/architecture.md, "Installed"), this one package holds
what a checkout has as top-level folders, under names that clash with nothing:

- ``mmspec.spec``: SPEC.md (package data), the types, typed errors, component Protocols
  and the ``Adapter`` contract an implementation is checked through;
- ``mmspec.reference``: the reference implementation;
- ``mmspec.properties``: the properties and state machines that check the clauses;
- ``mmspec.harness``: runs them against an adapter and reports (``python -m mmspec``);
- ``mmspec.exhaustive``, ``mmspec.contracts``: the exhaustive and CrossHair checkers;
- ``mmspec.adapters``: the adapter template and the torch, vLLM and SGLang adapters.

An adapter written against the installed package imports ``mmspec.spec.adapter``; one
in a checkout imports ``spec.adapter``. In a checkout this folder holds only the command
line's entry point (``__main__``). ``mmspec.__version__`` is the version every report's
first line names.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    if name == "__version__":
        from spec.clauses import mmspec_version  # installed: mmspec.spec.clauses

        return mmspec_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
