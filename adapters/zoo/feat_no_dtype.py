"""A processed feature's arrays are framed by shape and extent but not dtype: float32
pixel values and their int32 view share an identity (HASH-10)."""

from __future__ import annotations

import numpy as np

from reference.hasher import FeatureHasher
from spec.adapter import Adapter
from spec.types import ProcessedFeature

BREAKS = "HASH-10"
KILLED_BY = "hash_feature_different_content"
ORIGIN = (
    "typical student error: fixing SGLang's `hash_feature` by hashing each tensor's shape with "
    "its bytes but not its dtype, so float16 and bfloat16 processor outputs of the same bytes "
    "still collide"
)


def _untyped(array: np.ndarray) -> np.ndarray:
    contiguous = np.ascontiguousarray(array)
    return contiguous.view(np.uint8).reshape(*contiguous.shape, contiguous.itemsize)


class NoDtypeFeatureHasher(FeatureHasher):
    def feature_identity(self, feature: ProcessedFeature) -> str:
        if isinstance(feature, np.ndarray):
            return super().feature_identity(_untyped(feature))  # BUG: the dtype is lost
        return super().feature_identity([_untyped(array) for array in feature])


ADAPTER = Adapter(name="zoo.feat_no_dtype", feature_hasher=NoDtypeFeatureHasher)
