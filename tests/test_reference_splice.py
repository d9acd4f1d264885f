"""Unit tests of the reference splice (SPL-1..5)."""

from __future__ import annotations

import numpy as np
import pytest

from reference.processor import Processor
from reference.splice import Splice
from spec.errors import InvalidInputError, MarkerCountError, SpliceCountError
from spec.types import FixedPolicy, ProcessorConfig

MERGE = Splice().merge
INJECT = Splice().inject


def text_rows(rows: int, hidden: int = 3, dtype: type = np.float32) -> np.ndarray:
    return np.arange(rows * hidden, dtype=dtype).reshape(rows, hidden)


def image_rows(rows: int, hidden: int = 3, start: float = 100.0) -> np.ndarray:
    return start + np.arange(rows * hidden, dtype=np.float32).reshape(rows, hidden)


def mask(*bits: int) -> np.ndarray:
    return np.array([bool(b) for b in bits])


def test_merge_replaces_masked_rows_in_order() -> None:
    inputs = text_rows(6)
    a, b = image_rows(2, start=100), image_rows(1, start=200)
    merged = MERGE(inputs, [a, b], mask(0, 1, 1, 0, 1, 0))
    assert np.array_equal(merged[[0, 3, 5]], inputs[[0, 3, 5]])  # SPL-1
    assert np.array_equal(merged[[1, 2, 4]], np.concatenate([a, b]))  # SPL-2


def test_merge_returns_a_new_array() -> None:
    inputs = text_rows(3)
    original = inputs.copy()
    merged = MERGE(inputs, [image_rows(1)], mask(0, 1, 0))
    assert merged is not inputs
    assert np.array_equal(inputs, original)


def test_merge_casts_to_the_inputs_dtype() -> None:
    inputs = text_rows(2, dtype=np.float16)
    rows = np.array([[0.1, 0.2, 0.3]], dtype=np.float64)
    merged = MERGE(inputs, [rows], mask(1, 0))
    assert merged.dtype == np.float16
    assert merged[0].tobytes() == rows.astype(np.float16)[0].tobytes()


def test_positions_outside_the_mask_keep_their_text_rows() -> None:
    # is_embed-style: a range of 4 positions where only 2 take embeddings.
    inputs = text_rows(4)
    merged = MERGE(inputs, [image_rows(2)], mask(1, 0, 1, 0))
    assert np.array_equal(merged[[1, 3]], inputs[[1, 3]])


def test_empty_everything_is_fine() -> None:
    merged = MERGE(text_rows(2), [], mask(0, 0))
    assert np.array_equal(merged, text_rows(2))


@pytest.mark.parametrize(
    ("counts", "positions", "message"),
    [
        ([2, 1], 4, "Attempted to assign 2 + 1 = 3 multimodal tokens to 4 placeholders"),
        ([3], 2, "Attempted to assign 3 = 3 multimodal tokens to 2 placeholders"),
        ([], 2, "Attempted to assign 0 = 0 multimodal tokens to 2 placeholders"),
        ([1], 0, "Attempted to assign 1 = 1 multimodal tokens to 0 placeholders"),
    ],
)
def test_count_mismatch_message(counts: list[int], positions: int, message: str) -> None:
    inputs = text_rows(5)
    bits = [1] * positions + [0] * (5 - positions)
    with pytest.raises(SpliceCountError) as raised:
        MERGE(inputs, [image_rows(n) for n in counts], mask(*bits))
    assert str(raised.value) == message


def test_a_single_row_is_never_broadcast() -> None:
    with pytest.raises(SpliceCountError, match="1 = 1 multimodal tokens to 3 placeholders"):
        MERGE(text_rows(3), [image_rows(1)], mask(1, 1, 1))


@pytest.mark.parametrize(
    ("inputs", "embeds", "is_mm", "match"),
    [
        (text_rows(2), [image_rows(1)], mask(1, 0, 0), "3 entries for 2 rows"),
        (text_rows(2), [image_rows(1)], np.array([1, 0]), "bool"),
        (text_rows(2), [image_rows(1)], mask(1, 0).reshape(1, 2), "1-D"),
        (text_rows(2), [image_rows(1)], [True, False], "numpy bool array"),
        (text_rows(2), [np.zeros(3, dtype=np.float32)], mask(1, 0), "2-D"),
        (text_rows(2), [image_rows(1, hidden=4)], mask(1, 0), "hidden size 4"),
        (text_rows(2), image_rows(1), mask(1, 0), "list"),
        (np.zeros(6), [image_rows(1)], mask(1, 0), "2-D"),
        ([[0.0, 0.0, 0.0]], [image_rows(1)], mask(1), "numpy array"),
    ],
)
def test_merge_bad_input(inputs: object, embeds: object, is_mm: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        MERGE(inputs, embeds, is_mm)  # type: ignore[arg-type]


# --- injection -------------------------------------------------------------------------


def test_inject_replaces_each_marker_by_its_rows() -> None:
    text = text_rows(4)
    a, b = image_rows(2, start=100), image_rows(3, start=200)
    out = INJECT([5, 9, 6, 9], text, [a, b], marker_id=9)
    assert np.array_equal(out, np.concatenate([text[0:1], a, text[2:3], b]))


def test_inject_equals_expand_then_splice() -> None:
    marker, hidden = 32000, 4
    config = ProcessorConfig(policy=FixedPolicy(3), marker_id=marker)
    prompt, images = [1, marker, 2, marker], [b"a", b"b"]
    visual = [image_rows(3, hidden, start=100), image_rows(3, hidden, start=200)]
    table = np.random.default_rng(0).standard_normal((32004, hidden)).astype(np.float32)

    injected = INJECT(prompt, table[prompt], visual, marker)

    expanded = Processor(config).expand(prompt, images)
    is_mm = np.zeros(len(expanded.token_ids), dtype=bool)
    for placeholder_range in expanded.ranges:
        is_mm[placeholder_range.offset : placeholder_range.end] = True
    spliced = MERGE(table[list(expanded.token_ids)], visual, is_mm)
    assert injected.tobytes() == spliced.tobytes()


def test_inject_without_markers_copies() -> None:
    text = text_rows(2)
    out = INJECT([1, 2], text, [], marker_id=9)
    assert np.array_equal(out, text) and out is not text
    assert INJECT([], text_rows(0), [], marker_id=9).shape == (0, 3)


@pytest.mark.parametrize(("ids", "images"), [([9, 9], 1), ([1, 9], 2), ([1, 2], 1)])
def test_inject_marker_count_mismatch(ids: list[int], images: int) -> None:
    with pytest.raises(MarkerCountError, match="markers"):
        INJECT(ids, text_rows(2), [image_rows(1)] * images, marker_id=9)


@pytest.mark.parametrize(
    ("ids", "text", "visual", "marker", "match"),
    [
        ([1, 9], text_rows(3), [image_rows(1)], 9, "3 rows for 2"),
        ([1, 9.0], text_rows(2), [image_rows(1)], 9, "ints"),
        ("ab", text_rows(2), [image_rows(1)], 9, "list or tuple"),
        ([1, 9], text_rows(2), [image_rows(1, hidden=2)], 9, "hidden size"),
        ([1, 9], text_rows(2), [image_rows(1)], "9", "marker_id"),
    ],
)
def test_inject_bad_input(
    ids: object, text: object, visual: object, marker: object, match: str
) -> None:
    with pytest.raises(InvalidInputError, match=match):
        INJECT(ids, text, visual, marker)  # type: ignore[arg-type]
