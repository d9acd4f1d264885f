"""No options and empty options hash differently: the same image, with and without an
empty processor-kwargs mapping, gets two encoder-cache entries (HASH-5)."""

from __future__ import annotations

from collections.abc import Mapping

from reference.hasher import Hasher
from spec.adapter import Adapter
from spec.types import HashInput

BREAKS = "HASH-5"
KILLED_BY = "hash_covers_processor_options"
ORIGIN = (
    "typical student error: framing `None` as a value of its own instead of as no "
    "processor kwargs (vLLM's hash_kwargs(**{}) hashes no kwargs either way)"
)


class NoneIsNotEmpty(Hasher):
    def hash_item(self, data: HashInput, options: Mapping[str, HashInput] | None = None) -> str:
        if options is None:  # BUG: None framed as an option of its own
            return super().hash_item(data, {"<none>": b""})
        return super().hash_item(data, options)


ADAPTER = Adapter(name="zoo.hash_none_options_differ", hasher=NoneIsNotEmpty)
