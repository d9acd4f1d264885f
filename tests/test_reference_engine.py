"""The reference engine loop (SYS-1..10) on hand-made scenarios, composing the reference
components. Each test drives the engine step by step and checks what SPEC.md says the
step must do, in the vocabulary of vLLM's scheduler."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from harness.runner import Verdict, verify
from properties.framework import REGISTRY
from reference.encoder import Encoder
from reference.encoder_cache import EncoderCacheManager
from reference.engine import EngineLoop
from reference.hasher import Hasher
from reference.prefix import BlockHasher
from reference.scheduling import SchedulingHook
from reference.worker import WorkerStore
from spec import components
from spec.adapter import EngineParts
from spec.components import StepOutput
from spec.errors import AdmissionError, InvalidInputError, UnknownRequestError
from spec.types import EngineConfig, EngineRequest, MultiModalItem, PlaceholderRange

PARTS = EngineParts(
    hasher=Hasher,
    encoder=Encoder,
    encoder_cache_manager=EncoderCacheManager,
    scheduling_hook=SchedulingHook,
    block_hasher=BlockHasher,
    worker_store=WorkerStore,
)
IMAGE_TOKEN = 9
HIDDEN = 4


class Image:
    """A test image: bytes, a placeholder shape, its hash and its true embeddings."""

    def __init__(self, fill: int, length: int, is_embed: tuple[bool, ...] | None = None):
        self.data = bytes([fill]) * 16
        self.length = length
        self.is_embed = is_embed
        self.mm_hash = Hasher().hash_item(self.data)
        self.num_embeds = length if is_embed is None else sum(is_embed)
        self.rows: NDArray[Any] = Encoder(HIDDEN).encode(self.data, self.num_embeds)


A, B, C = Image(65, 3), Image(66, 2), Image(67, 1)
A_TWIN = Image(97, 3)  # same placeholder shape as A, other pixels


def request(rid: str, *segments: Image | Sequence[int], max_new: int = 1) -> EngineRequest:
    """A request from text runs and images, in order."""
    tokens: list[int] = []
    items: list[MultiModalItem] = []
    data: list[bytes] = []
    for segment in segments:
        if isinstance(segment, Image):
            position = PlaceholderRange(len(tokens), segment.length, segment.is_embed)
            items.append(MultiModalItem(segment.mm_hash, position))
            data.append(segment.data)
            tokens += [IMAGE_TOKEN] * segment.length
        else:
            tokens += list(segment)
    return EngineRequest(rid, tuple(tokens), tuple(items), tuple(data), max_new)


def engine(**overrides: Any) -> EngineLoop:
    settings: dict[str, Any] = dict(
        token_budget=8,
        encoder_compute_budget=6,
        encoder_cache_size=8,
        num_kv_blocks=16,
        block_size=2,
        hidden_size=HIDDEN,
    )
    settings.update(overrides)
    return EngineLoop(EngineConfig(**settings), PARTS)


def chunks_of(out: StepOutput) -> list[tuple[str, int, int]]:
    return [(c.request_id, c.num_computed_tokens, c.num_new_tokens) for c in out.chunks]


def run_until_idle(eng: EngineLoop, limit: int = 50) -> list[StepOutput]:
    outputs: list[StepOutput] = []
    for _ in range(limit):
        if not eng.snapshot().requests:
            return outputs
        outputs.append(eng.step())
    raise AssertionError(f"requests still unfinished after {limit} steps")


def gathered_rows(outputs: Sequence[StepOutput], rid: str) -> NDArray[Any]:
    rows = [g for out in outputs for c in out.chunks if c.request_id == rid for g in c.gathered]
    return np.concatenate(rows) if rows else np.zeros((0, HIDDEN), np.float32)


def test_engine_meets_its_protocol() -> None:
    assert isinstance(engine(), components.EngineLoop)


def test_prefill_then_decode_serves_the_unchunked_splice() -> None:
    """SYS-2, SYS-10: chunks of 3 tokens over [1 2 A 3 B]; the rows gathered across
    them are A's then B's; one more step decodes, then the request leaves."""
    eng = engine(token_budget=3)
    eng.add_request(request("r1", [1, 2], A, [3], B, max_new=2))
    outputs = run_until_idle(eng)
    assert [chunks_of(o) for o in outputs] == [
        [("r1", 0, 3)],
        [("r1", 3, 3)],
        [("r1", 6, 2)],
        [("r1", 8, 1)],  # the decode step computes the first generated token
    ]
    assert outputs[-1].finished == ("r1",)
    assert np.array_equal(gathered_rows(outputs, "r1"), np.concatenate([A.rows, B.rows]))
    assert eng.snapshot().encoder_num_calls == 2
    after = eng.snapshot()
    assert after.num_kv_blocks_in_use == 0
    assert all(not ids for ids in after.encoder_cache_refs.values())  # SYS-7
    assert after.worker_held == frozenset(after.encoder_cache_refs)  # SYS-5


def test_unaffordable_image_truncates_the_chunk_at_its_doorstep() -> None:
    """SCH-5 inside the engine: A takes 3 of the 4 budget, B (2) waits at its offset."""
    eng = engine(encoder_compute_budget=4)
    eng.add_request(request("r1", A, [1], B, [2]))
    first = eng.step()
    assert chunks_of(first) == [("r1", 0, 4)]
    assert first.encoded_mm_hashes == (A.mm_hash,)
    second = eng.step()
    assert chunks_of(second) == [("r1", 4, 3)]
    assert second.encoded_mm_hashes == (B.mm_hash,)


def test_continuation_inside_an_image_needs_no_new_encode() -> None:
    """A is encoded whole for a chunk that reads two of its rows; the next chunk
    continues inside A from the cache, and gets the remaining row."""
    eng = engine(token_budget=2)
    eng.add_request(request("r1", A, [1]))
    first, second = eng.step(), eng.step()
    assert first.encoded_mm_hashes == (A.mm_hash,) and second.encoded_mm_hashes == ()
    assert np.array_equal(first.chunks[0].gathered[0], A.rows[0:2])
    assert np.array_equal(second.chunks[0].gathered[0], A.rows[2:3])


def test_break_positions_take_no_rows() -> None:
    """An ``is_embed`` mask: the chunk over (T, F, T) gathers rows 0 and 1 only."""
    masked = Image(68, 3, (True, False, True))
    eng = engine()
    eng.add_request(request("r1", masked, [1], max_new=2))
    out = eng.step()
    assert len(out.chunks[0].gathered) == 1
    assert np.array_equal(out.chunks[0].gathered[0], masked.rows)
    sources = eng.snapshot().requests["r1"].kv_sources
    assert sources[:3] == (
        ("embed", masked.mm_hash, 0),
        ("token", IMAGE_TOKEN),
        ("embed", masked.mm_hash, 1),
    )


def test_prefix_hit_can_end_inside_an_image() -> None:
    """The same prompt again: full blocks are served from the prefix cache, at most
    len - 1 tokens, which here ends inside A; the rest of A comes from the encoder
    cache, and the shared KV is what this request would have computed (SYS-6)."""
    eng = engine(block_size=2)
    eng.add_request(request("r1", [1], A))  # tokens 1 A A A
    run_until_idle(eng)
    eng.add_request(request("r2", [1], A))
    out = eng.step()
    assert chunks_of(out) == [("r2", 2, 2)]  # hit of one block (position 3 is the last)
    assert out.encoded_mm_hashes == ()  # A is still held, unreferenced
    assert np.array_equal(out.chunks[0].gathered[0], A.rows[1:3])


def test_prefix_hit_stops_where_the_pixels_differ() -> None:
    """Same tokens, other pixels (PFX-4/5): the hit covers the text block only, and
    every image position is computed from the new image's rows."""
    eng = engine(block_size=2)
    eng.add_request(request("r1", [1, 2], A, [3]))
    run_until_idle(eng)
    eng.add_request(request("r2", [1, 2], A_TWIN, [3], max_new=2))
    out = eng.step()
    assert chunks_of(out)[0][1] == 2
    sources = eng.snapshot().requests["r2"].kv_sources
    assert sources[2:5] == tuple(("embed", A_TWIN.mm_hash, r) for r in range(3))


def test_kv_pressure_preempts_the_last_running_request() -> None:
    """Two requests that fit the KV cache alone but not together: the later one is
    preempted (blocks and references released, back to waiting with nothing
    computed), and both still finish."""
    eng = engine(num_kv_blocks=4, block_size=2, token_budget=8)
    eng.add_request(request("r1", [1, 2, 3], max_new=4))  # 6 KV positions
    eng.add_request(request("r2", A, [1], max_new=2))  # 5 KV positions
    outputs = [eng.step()]
    assert chunks_of(outputs[0]) == [("r1", 0, 3), ("r2", 0, 4)]
    preempted_at = None
    for _ in range(10):
        out = eng.step()
        outputs.append(out)
        if out.preempted:
            preempted_at = eng.snapshot()
            break
    assert preempted_at is not None
    victim = outputs[-1].preempted[0]
    assert victim == "r2"
    snap = preempted_at.requests["r2"]
    assert (snap.status, snap.num_computed_tokens, snap.kv_block_ids) == ("waiting", 0, ())
    assert all("r2" not in ids for ids in preempted_at.encoder_cache_refs.values())
    run_until_idle(eng)


def test_abort_releases_and_unknown_ids_are_refused() -> None:
    eng = engine(token_budget=2)
    eng.add_request(request("r1", A, [1]))
    eng.step()  # r1 is inside A and references it
    assert "r1" in eng.snapshot().encoder_cache_refs[A.mm_hash]
    eng.abort("r1")
    after = eng.snapshot()
    assert not after.requests and after.num_kv_blocks_in_use == 0
    assert after.encoder_cache_refs[A.mm_hash] == frozenset()
    with pytest.raises(UnknownRequestError):
        eng.abort("r1")
    with pytest.raises(UnknownRequestError):
        eng.preempt("r1")


def test_external_preemption_resets_a_running_request_only() -> None:
    eng = engine(token_budget=2)
    eng.add_request(request("r1", A, [1]))
    eng.add_request(request("r2", [1, 2, 3]))
    eng.step()
    eng.preempt("r2")  # still waiting: nothing changes
    eng.preempt("r1")
    snap = eng.snapshot().requests["r1"]
    assert (snap.status, snap.num_computed_tokens) == ("waiting", 0)
    assert eng.snapshot().encoder_cache_refs[A.mm_hash] == frozenset()
    run_until_idle(eng)


def test_a_stall_at_an_image_is_a_delay_not_a_deadlock() -> None:
    """Both prompts open with an image; the budget pays for one per step, so the second
    request gets no tokens in the first step (a zero-token stall), holds nothing while
    it waits, and runs in the next."""
    eng = engine(encoder_compute_budget=3)
    eng.add_request(request("r1", A, [1]))
    eng.add_request(request("r2", Image(69, 2), [1]))
    first = eng.step()
    assert chunks_of(first) == [("r1", 0, 4)]
    assert all("r2" not in ids for ids in eng.snapshot().encoder_cache_refs.values())
    second = eng.step()
    assert ("r2", 0, 3) in chunks_of(second)


def test_an_image_used_twice_does_not_block_the_image_between() -> None:
    """[A B A] with room for A or B, not both: A must not stay pinned between its two
    uses while B waits (SYS-8)."""
    a, b = Image(70, 2), Image(71, 2)
    eng = engine(encoder_compute_budget=2, encoder_cache_size=2)
    eng.add_request(request("r1", a, b, a))
    run_until_idle(eng, limit=12)


@pytest.mark.parametrize(
    ("overrides", "segments", "max_new", "why"),
    [
        ({"encoder_compute_budget": 2}, [A], 1, "encoder budget"),
        ({"encoder_cache_size": 2}, [A], 1, "encoder cache"),
        ({"disable_chunked_mm_input": True, "token_budget": 2}, [A], 1, "token budget"),
        ({"num_kv_blocks": 2, "block_size": 2}, [[1, 2, 3], C], 2, "KV blocks"),
    ],
)
def test_what_can_never_run_is_rejected_at_admission(
    overrides: dict[str, Any], segments: list[Any], max_new: int, why: str
) -> None:
    eng = engine(**overrides)
    with pytest.raises(AdmissionError, match=why):
        eng.add_request(request("r1", *segments, max_new=max_new))
    assert not eng.snapshot().requests


def test_what_fits_exactly_is_admitted() -> None:
    eng = engine(encoder_compute_budget=3, encoder_cache_size=3, num_kv_blocks=2, block_size=2)
    eng.add_request(request("r1", A, max_new=2))  # 3 + 1 positions in 2 blocks of 2
    run_until_idle(eng)


def test_malformed_requests_are_invalid_input() -> None:
    eng = engine()
    eng.add_request(request("r1", [1]))
    with pytest.raises(InvalidInputError):
        eng.add_request(request("r1", [2]))  # an unfinished id
    bad = request("r2", A)
    with pytest.raises(InvalidInputError):
        eng.add_request(EngineRequest("r2", bad.token_ids, bad.items, (), 1))
    with pytest.raises(InvalidInputError):
        eng.add_request(EngineRequest("r3", (), (), (), 1))


def test_engine_machine_runs_for_an_adapter_with_only_a_cache_manager(tmp_path: Path) -> None:
    """A cache manager alone is checked inside the reference loop
    (the machine is "subject_any"), and the report names who stood behind each part."""
    spec = REGISTRY["EngineMachine"]
    assert spec.subject_any and "encoder_cache_manager" in spec.subject
    full = tmp_path / "full_reference.py"
    full.write_text(
        "import dataclasses\n"
        "from reference.adapter import ADAPTER as REFERENCE\n"
        "from reference.engine import EngineLoop\n"
        "ADAPTER = dataclasses.replace(REFERENCE, engine_loop=EngineLoop)\n"
    )
    only_cache = tmp_path / "only_cache.py"
    only_cache.write_text(
        "from reference.encoder_cache import EncoderCacheManager\n"
        "from spec.adapter import Adapter\n"
        "ADAPTER = Adapter(name='student', encoder_cache_manager=EncoderCacheManager)\n"
    )
    report = verify(str(only_cache), "mutation", only=["EngineMachine"], fallback_ref=str(full))
    result = report.results["EngineMachine"]
    assert result.verdict is not Verdict.NOT_PROVIDED
    assert report.provenance["encoder_cache_manager"] == "student"
    assert report.provenance["engine_loop"] == "reference"
    nothing = tmp_path / "only_processor.py"
    nothing.write_text(
        "from reference.processor import Processor\n"
        "from spec.adapter import Adapter\n"
        "ADAPTER = Adapter(name='student', processor=Processor)\n"
    )
    report = verify(str(nothing), "mutation", only=["EngineMachine"], fallback_ref=str(full))
    assert report.results["EngineMachine"].verdict is Verdict.NOT_PROVIDED
