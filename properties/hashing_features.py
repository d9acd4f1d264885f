"""HASH-9, HASH-10 — the identity of processed features (SPEC.md).

An engine that keys an item by its processor output (SGLang: ``set_pad_value`` →
``hash_feature``, whose hash becomes the pad values and the embedding cache's key) owes
its callers what ``(data, options)`` hashing owes them (HASH-1, HASH-3, HASH-4): equal
features one identity, different features different ones. The pairs aim at what hashing
the bytes alone confuses — the same bytes in another shape, dtype or list split — beside
pairs that differ in one byte. Both clauses need the optional ``feature_hasher``
component; without it they are "not provided".
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, note
from hypothesis import strategies as st

from properties.framework import Parts, Runnable, check, clause_property, stateless
from properties.strategies import (
    FeaturePair,
    describe_feature,
    describe_layout,
    different_features,
    equal_feature_copy,
    processed_features,
    same_feature,
)
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
