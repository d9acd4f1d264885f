"""The catalog of properties: importing this module registers every property.

Each property module registers its properties with
:func:`properties.framework.clause_property` when it is imported. The runner asks
:func:`registered_properties` for them, so it always sees the full catalog; a clause of
SPEC.md whose property is not registered here is reported "missing property" (a
failure), never skipped. A new property module must be imported below.
"""

from __future__ import annotations

from collections.abc import Mapping

# Imported for their registrations (in SPEC.md's order of families).
from properties import (  # noqa: F401
    differential,
    encoder,
    encoder_cache_machine,
    encoder_decoder_cache_machine,
    engine_async_drafter_machine,
    engine_async_machine,
    engine_drafter_machine,
    engine_machine,
    engine_reset_machine,
    exp,
    hashing,
    hashing_uuid,
    item_cache_machine,
    prefix,
    prefix_identity,
    scheduling,
    scheduling_mismatch,
    splice,
    worker,
)
from properties.framework import REGISTRY, PropertySpec


def registered_properties() -> Mapping[str, PropertySpec]:
    """Every registered property by name, in registration order."""
    return REGISTRY
