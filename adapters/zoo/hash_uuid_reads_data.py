"""A request-supplied uuid's identifier also hashes the data that comes with it (HASH-7)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput


class DataReadingUuidHasher(Hasher):
    def item_identifier(
        self, data: HashInput | None, options: Mapping[str, HashInput] | None, uuid: str | None
    ) -> str:
        if uuid is None:
            return super().item_identifier(data, options, uuid)
        # BUG: "to be safe" the data is mixed in: a request that names a held item by its
        # uuid without resending the data gets another identifier and misses
        return self.hash_item([uuid, data], options)


BREAKS = "HASH-7"
KILLED_BY = "hash_uuid_names_its_content"
ORIGIN = (
    "typical student error: binding the uuid to the payload by hashing both, which defeats "
    "the feature (a request may omit the data of an item it names)"
)
ADAPTER = Adapter(name="zoo.hash_uuid_reads_data", hasher=DataReadingUuidHasher)
