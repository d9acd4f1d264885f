"""HASH-9, HASH-10, HASH-11 — the identity of processed features (SPEC.md).

An engine that keys an item by its processor output (SGLang: ``set_pad_value`` →
``hash_feature``, whose hash becomes the pad values and the embedding cache's key) owes
its callers what ``(data, options)`` hashing owes them (HASH-1, HASH-3, HASH-4): equal
features one identity, different features different ones. The pairs aim at what hashing
the bytes alone confuses — the same bytes in another shape, dtype or list split — beside
pairs that differ in one byte. HASH-11 asks what HASH-8 asks of a request-supplied
uuid of an item whose request carries its own hash (SGLang's ``processor_output``
``hash``). All three need the optional ``feature_hasher`` component (HASH-11 also its
``feature_identifier``); without it they are "not provided".
"""

from __future__ import annotations

from typing import cast

import numpy as np
from hypothesis import example, given, note
from hypothesis import strategies as st

from properties.framework import (
    Parts,
    Runnable,
    check,
    clause_property,
    probed_product,
    stateless,
)
from properties.strategies import (
    FeaturePair,
    describe_feature,
    describe_layout,
    different_features,
    equal_feature_copy,
    processed_features,
    same_feature,
)
from spec.components import ClientHashedFeatureHasher, FeatureHasher
from spec.types import ProcessedFeature


@st.composite
def _feature_and_copy(draw: st.DrawFn) -> tuple[ProcessedFeature, ProcessedFeature]:
    feature = draw(processed_features(), label="feature")
    return feature, draw(equal_feature_copy(feature), label="an equal copy")


@clause_property("hash_feature_equal_content", "HASH-9", subject=("feature_hasher",))
def hash_feature_equal_content(parts: Parts) -> Runnable:
    """HASH-9: an equal feature in new objects (copies, other layouts) has the same
    identity, on every call."""

    @given(case=_feature_and_copy())
    def test(case: tuple[ProcessedFeature, ProcessedFeature]) -> None:
        feature, copy = case
        note(f"feature {describe_feature(feature)}; an equal copy in new objects, laid out "
             f"{describe_layout(copy)}")
        hasher = parts.feature_hasher()
        first, again = hasher.feature_identity(feature), hasher.feature_identity(feature)
        check(first == again, "HASH-9",
              f"the same feature {describe_feature(feature)} got two identities: "
              f"{first} then {again}")
        of_copy = hasher.feature_identity(copy)
        check(first == of_copy, "HASH-9",
              f"equal features {describe_feature(feature)} in new objects got different "
              f"identities: {first} vs {of_copy}")

    return stateless(test)


#: The confusion a search meets least often (the same shape in two dtypes of one itemsize),
#: run first; the search finds another shape or list split within a few examples.
_ELEMENTS = np.arange(6, dtype=np.float32)
_DTYPE_ONLY = FeaturePair(_ELEMENTS, _ELEMENTS.view(np.int32), "float32 vs its int32 view")


@clause_property("hash_feature_different_content", "HASH-10", subject=("feature_hasher",))
def hash_feature_different_content(parts: Parts) -> Runnable:
    """HASH-10: features that differ — a byte, or the same bytes in another shape, dtype
    or list split — get different identities."""

    @given(pair=different_features())
    @example(pair=_DTYPE_ONLY)
    def test(pair: FeaturePair) -> None:
        if same_feature(pair.first, pair.second) is not False:
            return  # framed alike (or an array against a list): nothing is claimed
        note(f"{describe_feature(pair.first)} vs {describe_feature(pair.second)} "
             f"({pair.why})")
        hasher = parts.feature_hasher()
        first, second = hasher.feature_identity(pair.first), hasher.feature_identity(pair.second)
        check(first != second, "HASH-10",
              f"different features {describe_feature(pair.first)} and "
              f"{describe_feature(pair.second)} ({pair.why}) got one identity: {first}")

    return stateless(test)


#: The optional capability HASH-11 needs (``spec.components.ClientHashedFeatureHasher``).
CLIENT_HASH = "feature_identifier"


def client_hash_probe(parts: Parts) -> str | None:
    """Why the feature hasher lacks ``feature_identifier`` (None: it has it)."""
    hasher = probed_product(parts.feature_hasher(), FeatureHasher, "feature_hasher")
    if callable(getattr(hasher, CLIENT_HASH, None)):
        return None
    return f"the feature hasher does not provide the optional {CLIENT_HASH}() (HASH-11)"


@clause_property(
    "hash_feature_client_never_names_content",
    "HASH-11",
    subject=("feature_hasher",),
    capabilities=(("HASH-11", client_hash_probe),),
)
def hash_feature_client_never_names_content(parts: Parts) -> Runnable:
    """HASH-11: a request that carries its item's hash never gets the identity of other
    content — not even by sending that content's own identity, which anyone who has the
    content can compute; without a hash, the item's identity is its feature's."""
    if client_hash_probe(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(pair=different_features(), own=st.booleans())
    @example(pair=_DTYPE_ONLY, own=False)
    def test(pair: FeaturePair, own: bool) -> None:
        if same_feature(pair.first, pair.second) is not False:
            return  # framed alike: the same content, nothing is claimed
        hasher = parts.feature_hasher()
        client = cast(ClientHashedFeatureHasher, hasher)
        victim = hasher.feature_identity(pair.first)
        plain = client.feature_identifier(pair.first, None)
        check(plain == victim, "HASH-11",
              f"without a client hash, {describe_feature(pair.first)} got {plain}, not its "
              f"feature's identity {victim}")
        own_identity = hasher.feature_identity(pair.second)
        if own_identity == victim:
            return  # the contents already share an identity: HASH-10's failure, not this one
        # the client names the victim's identity, or (own) its own content's: either way
        # its item must not share the victim's identity
        claimed = own_identity if own else victim
        whose = "its own identity" if own else "A's identity"
        note(f"content A {describe_feature(pair.first)} has identity {victim}; a request "
             f"sends content B {describe_feature(pair.second)} ({pair.why}) with the hash "
             f"{claimed} ({whose})")
        forged = client.feature_identifier(pair.second, claimed)
        check(forged != victim, "HASH-11",
              f"a request that sends {describe_feature(pair.second)} with the hash {claimed} "
              f"gets the identity of other content, {describe_feature(pair.first)} "
              f"({pair.why}; identity {victim}): its item and A share the prefix-cache keys "
              "and the embedding-cache entry")

    return stateless(test)
