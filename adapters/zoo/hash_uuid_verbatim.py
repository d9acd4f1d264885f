"""A request-supplied uuid is the identifier itself when no options apply (HASH-8)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput


class VerbatimUuidHasher(Hasher):
    def item_identifier(
        self, data: HashInput | None, options: Mapping[str, HashInput] | None, uuid: str | None
    ) -> str:
        if uuid is not None and not options:
            return uuid  # BUG: a uuid equal to a content hash names that content's entry
        return super().item_identifier(data, options, uuid)


BREAKS = "HASH-8"
KILLED_BY = "hash_uuid_never_names_content"
ORIGIN = (
    "vLLM v0.22.1 and v0.33.0 multimodal/processing/inputs.py::ProcessorInputs.get_mm_hashes "
    "appends the client's uuid verbatim when there are no processor kwargs (docs/findings.md, V17)"
)
ADAPTER = Adapter(name="zoo.hash_uuid_verbatim", hasher=VerbatimUuidHasher)
