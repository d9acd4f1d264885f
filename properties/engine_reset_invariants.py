"""The checks ``EngineResetMachine`` adds to the engine machine's, one group per clause
(SYS-11: resets; SYS-12: weight updates), each readable as its clause in SPEC.md.

Every other engine invariant keeps running after a reset or an update, under its own
clause (:mod:`properties.engine_reset_machine`); these are the promises the operations
make themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from properties.framework import check
from spec.components import EngineSnapshot, RequestSnapshot
from spec.types import EngineConfig
from spec.weights import rows_at_weights_version

Label = Callable[[str], str]


# --- SYS-11: a reset forgets, and only what it says ----------------------------------------


def sys11_encoder_cache_forgotten(
    config: EngineConfig, after: EngineSnapshot, label: Label
) -> None:
    """Right after ``reset_encoder_cache()``: the cache manager holds nothing and reports
    every slot free, and the worker holds nothing."""
    held = sorted(map(label, after.encoder_cache_refs))
    check(
        not held and after.encoder_cache_free_slots == config.encoder_cache_size,
        "SYS-11",
        f"after reset_encoder_cache() the cache manager still holds {held} with "
        f"{after.encoder_cache_free_slots} of {config.encoder_cache_size} slots free",
    )
    kept = sorted(map(label, after.worker_held))
    check(
        not kept,
        "SYS-11",
        f"after reset_encoder_cache() the worker still holds the embeddings of {kept}",
    )


def sys11_served_encoded_after_reset(
    step: int, request_id: str, image: str, mm_hash: str, encoded_since: set[str]
) -> None:
    """A row gathered after ``reset_encoder_cache()`` comes from an encode after it."""
    check(
        mm_hash in encoded_since,
        "SYS-11",
        f"step {step}: {request_id} is served rows of image {image}, which has not been "
        "encoded since reset_encoder_cache(): they were computed before the reset",
    )


def sys11_prefix_reset_answer(before: EngineSnapshot, reset: object, after: EngineSnapshot) -> None:
    """``reset_prefix_cache()`` answers a bool; ``True`` whenever no KV block is in use;
    ``False`` only with nothing changed."""
    check(
        isinstance(reset, bool),
        "SYS-11",
        f"reset_prefix_cache() returned {reset!r}, not a bool",
    )
    if before.num_kv_blocks_in_use == 0:
        check(
            reset is True,
            "SYS-11",
            "reset_prefix_cache() returned False although no KV block was in use",
        )
    if reset is False:
        check(
            after == before,
            "SYS-11",
            "reset_prefix_cache() returned False (nothing reset) but the engine's state "
            "changed",
        )


def sys11_prefix_hit_recomputed(
    step: int, request_id: str, start: int, computed_since: bool
) -> None:
    """After a successful ``reset_prefix_cache()``, a prefix hit serves only KV computed
    since it: some request computed these positions' contents after the reset."""
    check(
        computed_since,
        "SYS-11",
        f"step {step}: {request_id} starts at a prefix hit of {start} positions, but no "
        "request has computed that prefix since reset_prefix_cache(): the hit serves KV "
        "computed before the reset",
    )


# --- SYS-12: after a weight update, nothing computed before it is served -------------------


def sys12_kv_at_current_weights(request_id: str, snap: RequestSnapshot, version: int) -> None:
    """Every computed position of an unfinished request is at the current weights
    version (one version per position)."""
    versions = snap.kv_weights_versions
    check(
        len(versions) == snap.num_computed_tokens,
        "SYS-12",
        f"{request_id}: {len(versions)} KV weights versions for "
        f"{snap.num_computed_tokens} computed positions",
    )
    stale = [p for p, v in enumerate(versions) if v != version]
    check(
        not stale,
        "SYS-12",
        f"{request_id}'s KV at positions {stale} was computed at weights version "
        f"{[versions[p] for p in stale]}; the weights are version {version}",
    )


def sys12_rows_at_current_weights(
    step: int, request_id: str, image: str, encoded: NDArray[Any], got: object, version: int
) -> None:
    """Rows served are not an earlier weights version's rows of the image (whether they
    are exactly the current version's is SYS-2's check)."""
    if not isinstance(got, np.ndarray) or got.shape != encoded.shape:
        return  # SYS-1 says what is wrong with it
    stale = [
        old for old in range(version)
        if np.array_equal(got, rows_at_weights_version(encoded, old))
    ]
    check(
        not stale,
        "SYS-12",
        f"step {step}: {request_id} is served image {image}'s rows at weights version "
        f"{stale[0] if stale else '?'}; the weights are version {version}",
    )
