"""The optional extension Protocols a component may also meet.

Some properties ask more of a component when it offers more (SPL-5 and DIFF-2 run when
a splice has ``inject``, PFX-3 when a block hasher has ``block_extra_keys``; the
differential checks run bfloat16 when a splice has ``merge_bfloat16``; ECM-8 and ECM-9
when the cache manager has ``tracked_request_ids``/``tracked_mm_hashes`` and ``reset``;
ECD-6 when the
encoder-decoder cache manager has ``reset``; PFX-7 and PFX-8 when the block hasher has
``request_block_hashes_with`` (PFX-7 drawing only the kinds of ``identity_kinds``
where the hasher has it); HASH-7 and HASH-8 when the hasher has ``item_identifier``;
SYS-11 to SYS-16 when the engine loop has the resets, ``update_weights``,
``num_speculative_tokens``, ``async_scheduling`` or ``mamba_block_aligned``; and
WRK-1, WRK-2 and WRK-5 not when the worker store declares ``self_managed``):
the child reports which extension members its object has, and the grader's proxy offers
exactly those, so that ``isinstance(proxy, Bfloat16Splice)`` answers as it would in process.
"""

from __future__ import annotations

from harness.loader import protocol_members
from spec.components import (
    AsyncEngine,
    Bfloat16Splice,
    BlockExtraKeys,
    ClientHashedFeatureHasher,
    EncoderCacheBookkeeping,
    HybridEngine,
    IdentityBlockHasher,
    InjectingSplice,
    KindLimitedIdentityBlockHasher,
    MultiPrecisionEncoder,
    RequestIdentifiedHasher,
    ResettableEncoderCache,
    ResettableEngine,
    SelfManagedWorkerStore,
    SpeculativeEngine,
    WeightUpdatableEngine,
)

#: component -> the extension Protocols its product may meet.
EXTENSIONS: dict[str, tuple[type, ...]] = {
    # SPL-5 and DIFF-2's optional capability, and DIFF-1..3's bfloat16
    "splice": (InjectingSplice, Bfloat16Splice),
    "encoder": (MultiPrecisionEncoder,),
    # ECM-8 and ECM-9's optional capabilities: probed on the proxy, as in process
    "encoder_cache_manager": (ResettableEncoderCache, EncoderCacheBookkeeping),
    # PFX-3's optional capability, and PFX-7 and PFX-8's (with the kinds PFX-7 draws)
    "block_hasher": (BlockExtraKeys, IdentityBlockHasher, KindLimitedIdentityBlockHasher),
    # HASH-7 and HASH-8's
    "hasher": (RequestIdentifiedHasher,),
    # HASH-11's
    "feature_hasher": (ClientHashedFeatureHasher,),
    # ECD-6's optional capability
    "encoder_decoder_cache_manager": (ResettableEncoderCache,),
    # WRK-1, WRK-2 and WRK-5: not provided for a store that declares its own cache
    "worker_store": (SelfManagedWorkerStore,),
    # SYS-11, SYS-12, SYS-13/14's, SYS-15's and SYS-16's
    "engine_loop": (
        ResettableEngine, WeightUpdatableEngine, SpeculativeEngine, AsyncEngine, HybridEngine
    ),
}


def extension_members(component: str, product: object) -> tuple[str, ...]:
    """The members of ``component``'s extension Protocols that ``product`` has, for
    each Protocol whose members it has all of."""
    found: list[str] = []
    for protocol in EXTENSIONS.get(component, ()):
        names = tuple(protocol_members(protocol))
        if all(hasattr(product, name) for name in names):
            found += names
    return tuple(found)


def extension_protocols(component: str) -> tuple[type, ...]:
    return EXTENSIONS.get(component, ())


#: Queries (methods without arguments that only read state) the child answers after every
#: call on the component too, named ``"snapshot()"``: the engine machines read the
#: engine's snapshot before and after each step, and a snapshot read before a step is
#: the one read after the call that ended the last (a third of their round trips); the
#: cache machine reads the cache manager's bookkeeping (ECM-8's two queries, when the
#: object has them) after every step (a quarter of its round trips).
OBSERVED_QUERIES: dict[str, tuple[str, ...]] = {
    "engine_loop": ("snapshot",),
    "encoder_cache_manager": ("tracked_mm_hashes", "tracked_request_ids"),
}


def query_name(method: str) -> str:
    """How an observed query's answer is keyed among the properties read after a call."""
    return f"{method}()"


def observed_properties(component: str, extras: tuple[str, ...]) -> tuple[str, ...]:
    """The Protocol properties of ``component`` (and of the extension members
    ``extras``) that the child reads after every call (see :mod:`.child`), and its
    :data:`OBSERVED_QUERIES` (as :func:`query_name`)."""
    from spec.adapter import COMPONENTS

    protocols = dict(COMPONENTS)
    members = protocol_members(protocols[component])
    names = [n for n, d in members.items() if isinstance(d, property)]
    for protocol in extension_protocols(component):
        names += [
            n
            for n, d in protocol_members(protocol).items()
            if isinstance(d, property) and n in extras
        ]
    declared = set(members) | set(extras)
    names += [query_name(q) for q in OBSERVED_QUERIES.get(component, ()) if q in declared]
    return tuple(names)
