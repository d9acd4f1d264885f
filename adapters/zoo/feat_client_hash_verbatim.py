"""A request's own item hash is taken verbatim as the item's identity, as SGLang 0.5.22+
does with a ``processor_output`` item's ``hash``: a client that sends another image's
identity gets that image's identity (HASH-11)."""

from __future__ import annotations

from reference.hasher import FeatureHasher
from spec.adapter import Adapter
from spec.types import ProcessedFeature

BREAKS = "HASH-11"
KILLED_BY = "hash_feature_client_never_names_content"
ORIGIN = (
    "SGLang v0.5.23 (and 0.5.22): `collect_mm_items_from_processor_output` keeps a dict "
    "item's `hash`, and `set_pad_value` reuses it (`resolve_multimodal_item_hash`: "
    "'if exists, reuse')"
)


class ClientHashVerbatim(FeatureHasher):
    def feature_identifier(self, feature: ProcessedFeature, client_hash: str | None) -> str:
        if client_hash is None:
            return self.feature_identity(feature)
        return client_hash  # BUG: the client's hash is the identity, content's included


ADAPTER = Adapter(name="zoo.feat_client_hash_verbatim", feature_hasher=ClientHashVerbatim)
