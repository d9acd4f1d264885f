"""Without a client hash, an item's identity is not its feature's: the hasher tags every
item it was asked about under ``feature_identifier``, client hash or not (HASH-11)."""

from __future__ import annotations

import hashlib

from reference.hasher import FeatureHasher
from spec.adapter import Adapter
from spec.types import ProcessedFeature

BREAKS = "HASH-11"
KILLED_BY = "hash_feature_client_never_names_content"
ORIGIN = (
    "typical student error: the client-hash path hashes `(client_hash, identity)` even when "
    "the request sent no hash, so the same image gets two identities by path"
)


class TagsEveryItem(FeatureHasher):
    def feature_identifier(self, feature: ProcessedFeature, client_hash: str | None) -> str:
        # BUG: no client hash should mean the feature's own identity
        tag = f"{client_hash!r}:{self.feature_identity(feature)}".encode()
        return hashlib.sha256(tag).hexdigest()


ADAPTER = Adapter(name="zoo.feat_client_hash_ignored_twice", feature_hasher=TagsEveryItem)
