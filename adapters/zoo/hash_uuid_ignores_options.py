"""A request-supplied uuid's identifier leaves the processor options out (HASH-7)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput


class OptionlessUuidHasher(Hasher):
    def item_identifier(
        self, data: HashInput | None, options: Mapping[str, HashInput] | None, uuid: str | None
    ) -> str:
        if uuid is None:
            return super().item_identifier(data, options, uuid)
        return super().item_identifier(None, {}, uuid)  # BUG: the options are dropped


BREAKS = "HASH-7"
KILLED_BY = "hash_uuid_names_its_content"
ORIGIN = (
    "typical student error: the uuid alone, whatever options the item was processed under "
    "(vLLM v0.22.1 get_mm_hashes: \"we still compute a hash if hf_processor_mm_kwargs is "
    "provided\", because the processed inputs depend on them)"
)
ADAPTER = Adapter(name="zoo.hash_uuid_ignores_options", hasher=OptionlessUuidHasher)
