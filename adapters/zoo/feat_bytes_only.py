"""A processed feature is identified by its bytes alone, as SGLang's ``hash_feature``
does: the same bytes in another shape, dtype or list split share an identity (HASH-10)."""

from __future__ import annotations

import hashlib

import numpy as np

from spec.adapter import Adapter
from spec.types import ProcessedFeature

BREAKS = "HASH-10"
KILLED_BY = "hash_feature_different_content"
ORIGIN = (
    "SGLang v0.5.23 (and 0.5.3, 0.5.22) `mm_utils.py::hash_feature`/`tensor_hash`: each "
    "tensor flattened, viewed as uint8 and fed to one sha256 (sgl-project/sglang#25462, unfixed)"
)


class BytesOnlyFeatureHasher:
    def feature_identity(self, feature: ProcessedFeature) -> str:
        arrays = [feature] if isinstance(feature, np.ndarray) else list(feature)
        digest = hashlib.sha256()
        for array in arrays:
            digest.update(np.ascontiguousarray(array).tobytes())  # BUG: no dtype, shape, extent
        return digest.hexdigest()


ADAPTER = Adapter(name="zoo.feat_bytes_only", feature_hasher=BytesOnlyFeatureHasher)
