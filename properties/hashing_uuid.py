"""Request-supplied item identifiers (SPEC.md HASH-7, HASH-8).

A client may name an item itself (vLLM's ``multi_modal_uuids``; the chat API's
per-part ``uuid``) and promises that one name stands for one content: the engine then
skips hashing the data, and a later request may omit it. The hasher offers this through
the optional ``item_identifier(data, options, uuid)``
(``spec.components.RequestIdentifiedHasher``); without it both clauses are "not
provided".

- HASH-7: the identifier of a uuid is a function of the uuid and the options: the same
  whatever data comes with it (or none), different for another uuid or other options.
- HASH-8: no uuid, however chosen, yields the identifier of a content hash. The search
  sends, as a uuid, the very content hash another request's image has — the one value a
  uuid must never stand for, since the requests that sent that image without a uuid
  rely on content identity (HASH-2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from hypothesis import example, given, note
from hypothesis import strategies as st

from properties.framework import (
    Parts,
    Runnable,
    check,
    clause_property,
    probed_product,
    stateless,
)
from properties.strategies import describe_image, different_options, images, processor_options
from spec.components import Hasher, RequestIdentifiedHasher
from spec.types import HashInput

#: The optional capability both clauses need.
CAPABILITY = "item_identifier"

#: Client-chosen names: short, so that they recur, and uuid-shaped ones.
UUIDS = st.sampled_from(["u1", "u2", "img-0", "8f14e45f-ceea-467f-a0e6-9ba1c0b2b6d1"]) | st.text(
    alphabet="abcdef0123456789-", min_size=1, max_size=12
)


def _probe(clause: str) -> Any:
    def probe(parts: Parts) -> str | None:
        # a factory that raises, or gives no hasher, raises here: an error (issue 32)
        hasher = probed_product(parts.hasher(), Hasher, "hasher")
        if callable(getattr(hasher, CAPABILITY, None)):
            return None
        return f"the hasher does not provide the optional {CAPABILITY}() ({clause})"

    return probe


def _show(data: object) -> str:
    if data is None:
        return "no data"
    return (
        describe_image(data) if isinstance(data, np.ndarray) else f"{len(cast(bytes, data))} bytes"
    )


def _identified(parts: Parts) -> RequestIdentifiedHasher:
    return cast(RequestIdentifiedHasher, parts.hasher())


@st.composite
def _uuid_case(
    draw: st.DrawFn,
) -> tuple[str, dict[str, Any], HashInput | None, HashInput | None]:
    """A uuid, its options, and two payloads sent with it (or none: the data omitted)."""
    uuid = draw(UUIDS, label="uuid")
    options = draw(processor_options(), label="options")
    first = draw(st.none() | images(), label="data of the first request")
    second = draw(st.none() | images(), label="data of the second request")
    return uuid, options, first, second


@clause_property(
    "hash_uuid_names_its_content",
    "HASH-7",
    subject=("hasher",),
    capabilities=(("HASH-7", _probe("HASH-7")),),
)
def hash_uuid_names_its_content(parts: Parts) -> Runnable:
    """HASH-7: a uuid's identifier depends on the uuid and the options only."""
    if _probe("HASH-7")(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(case=_uuid_case(), other_uuid=UUIDS, changed=different_options())
    def test(
        case: tuple[str, dict[str, Any], HashInput | None, HashInput | None],
        other_uuid: str,
        changed: tuple[dict[str, Any], dict[str, Any], str],
    ) -> None:
        uuid, options, first, second = case
        hasher = _identified(parts)
        note(f"request 1 sends uuid {uuid!r} with {_show(first)}, options {options!r}")
        note(f"request 2 sends uuid {uuid!r} with {_show(second)}, the same options")
        one = hasher.item_identifier(first, options, uuid)
        two = hasher.item_identifier(second, dict(options), "".join(list(uuid)))
        check(
            one == two,
            "HASH-7",
            f"the same uuid {uuid!r} under the same options gets the identifier {one!r} with "
            f"{_show(first)} and {two!r} with {_show(second)}: a request that names a held "
            f"item by its uuid misses it (or, without data, cannot be served)",
        )
        if other_uuid != uuid:
            other = hasher.item_identifier(first, options, other_uuid)
            check(
                other != one,
                "HASH-7",
                f"the uuids {uuid!r} and {other_uuid!r} get the same identifier {one!r}: two "
                f"clients' items share one cache entry",
            )
        base, moved, how = changed
        note(f"options {base!r} and {moved!r} differ ({how})")
        check(
            hasher.item_identifier(first, base, uuid) != hasher.item_identifier(first, moved, uuid),
            "HASH-7",
            f"uuid {uuid!r} under the options {base!r} and {moved!r} gets one identifier: an "
            f"item processed under one set of options is served embeddings computed under the "
            f"other",
        )
        if first is not None:
            check(
                hasher.item_identifier(first, options, None) == _plain(parts, first, options),
                "HASH-7",
                "without a uuid, item_identifier(data, options, None) differs from "
                "hash_item(data, options)",
            )

    return stateless(test)


def _plain(parts: Parts, data: HashInput, options: Mapping[str, HashInput]) -> str:
    return parts.hasher().hash_item(data, options)


#: How the second client chooses its uuid: the first request's content hash (the
#: attack), or a name of its own.
CHOICES = st.sampled_from(["the content hash", "the content hash", "a name of its own"])


@clause_property(
    "hash_uuid_never_names_content",
    "HASH-8",
    subject=("hasher",),
    capabilities=(("HASH-8", _probe("HASH-8")),),
)
def hash_uuid_never_names_content(parts: Parts) -> Runnable:
    """HASH-8: a uuid never gets the identifier an item's content hash is."""
    if _probe("HASH-8")(parts) is not None:
        return Runnable(run=lambda settings: None)

    @given(
        victim=images(),
        victim_options=processor_options(),
        choice=CHOICES,
        own_name=UUIDS,
        payload=st.none() | images(),
        same_options=st.booleans(),
    )
    # V17 (vLLM 0.22.1, 0.33.0): the content hash itself, sent as a uuid, with no options
    @example(
        victim=np.zeros((2, 2), dtype=np.uint8),
        victim_options={},
        choice="the content hash",
        own_name="u1",
        payload=np.ones((2, 2), dtype=np.uint8),
        same_options=True,
    )
    def test(
        victim: HashInput,
        victim_options: dict[str, Any],
        choice: str,
        own_name: str,
        payload: HashInput | None,
        same_options: bool,
    ) -> None:
        hasher = _identified(parts)
        content_hash = hasher.item_identifier(victim, victim_options, None)
        note(
            f"request 1 sends {_show(victim)} with options {victim_options!r} and no uuid: "
            f"its identifier is the content hash {content_hash!r}"
        )
        uuid = content_hash if choice == "the content hash" else own_name
        options = victim_options if same_options else {}
        note(f"request 2 sends uuid {uuid!r} ({choice}) with {_show(payload)}, options {options!r}")
        identifier = hasher.item_identifier(payload, options, uuid)
        check(
            identifier != content_hash,
            "HASH-8",
            f"request 2's uuid {uuid!r} gets the identifier {identifier!r}, request 1's content "
            f"hash: whichever is encoded first fills the entry both read — a client that knows "
            f"an image and the model serves its own embeddings to every request that sends "
            f"that image",
        )

    return stateless(test)
