"""A processed feature is identified by the object holding it: the same feature in
another object (a copy, another layout) gets another identity (HASH-9)."""

from __future__ import annotations

from spec.adapter import Adapter
from spec.types import ProcessedFeature

BREAKS = "HASH-9"
KILLED_BY = "hash_feature_equal_content"
ORIGIN = (
    "typical student error: keying a processed item by `id(feature)` or its data pointer to skip "
    "hashing the tensor, as a cache keyed by object identity does"
)


class IdentityFeatureHasher:
    def feature_identity(self, feature: ProcessedFeature) -> str:
        return f"{id(feature):x}"  # BUG: the object, not its content


ADAPTER = Adapter(name="zoo.feat_by_identity", feature_hasher=IdentityFeatureHasher)
