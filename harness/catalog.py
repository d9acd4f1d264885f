"""The catalog of properties: importing this module registers every property.

Each property module registers its properties with
:func:`properties.framework.clause_property` when it is imported. The runner asks
:func:`registered_properties` for them, so it always sees the full catalog; a clause of
SPEC.md whose property is not registered here is reported "missing property" (a
failure), never skipped. A new property module must be listed in :data:`MODULES`.

The student kit (``make student-kit``, docs/grading.md "The student kit") holds only
the property modules that need no part of the reference — neither ``reference/`` nor
the models and oracles the properties compare with — and no copy of the others: there
(:data:`harness.names.HAS_REFERENCE` false) only the modules present are imported, and
the properties SPEC.md names that the kit lacks are :func:`needing_the_reference`:
graded on the autograder, never "missing".
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from harness import names
from properties.framework import REGISTRY, PropertySpec
from spec.clauses import load_clauses

#: Every property module, imported for its registrations in this order.
MODULES: tuple[str, ...] = (
    "differential",
    "embedding_cache_machine",
    "encoder",
    "encoder_cache_machine",
    "encoder_decoder_cache_machine",
    "engine_async_drafter_machine",
    "engine_async_machine",
    "engine_drafter_machine",
    "engine_hybrid_machine",
    "engine_machine",
    "engine_reset_machine",
    "exp",
    "hashing",
    "hashing_features",
    "hashing_uuid",
    "item_cache_machine",
    "prefix",
    "prefix_identity",
    "scheduling",
    "scheduling_mismatch",
    "splice",
    "worker",
)


def _held(module: str) -> bool:
    """Whether this copy holds the property module (every copy with the reference does:
    a missing one there is an import error, as it should be)."""
    return names.HAS_REFERENCE or (names.HOME / "properties" / f"{module}.py").is_file()


for _module in MODULES:
    if _held(_module):
        importlib.import_module(names.module(f"properties.{_module}"))


def registered_properties() -> Mapping[str, PropertySpec]:
    """Every registered property by name, in registration order."""
    return REGISTRY


def needing_the_reference() -> frozenset[str]:
    """The properties SPEC.md names that this copy lacks because they need the reference
    (the student kit: they are graded on the autograder). None where the reference is
    here: a property missing there is a defect of the suite ("missing property")."""
    if names.HAS_REFERENCE:
        return frozenset()
    return frozenset(
        name for clause in load_clauses().values() for name in clause.checked_by
        if name not in REGISTRY
    )


def clauses_needing_the_reference() -> frozenset[str]:
    """The clauses a property of :func:`needing_the_reference` checks."""
    absent = needing_the_reference()
    return frozenset(
        clause.id for clause in load_clauses().values() if absent & set(clause.checked_by)
    )
