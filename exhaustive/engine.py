"""The engine loop's exhaustive scope (SYS-1..10).

Each scenario is one engine configuration (block size 2; token budget up to 4, encoder
budget up to 3, encoder cache up to 4 embeddings) with a fixed universe of images and
prompts of up to two images. The operations are those of ``EngineMachine``, every one
enabled in a state: a request for each prompt arrives (at most ``max_requests`` in
all), one step runs, every unfinished request is aborted or preempted, the engine is
drained (steps until every request finishes, within the model's bound: SYS-8's
liveness), and a finished request's id is aborted again (it must be refused). Every
operation runs with the machine's own checks, which compare the engine's step output
and snapshot with the model after every step.

A state is the model's state (each unfinished request's prompt and its progress since
its last (re)start, the prompts whose prefill completed — what a correct prefix cache holds —
the order in which held encoder cache entries became idle, the countdown of a request
alone in the engine, the next request id) plus the engine's observable state (its
snapshot: every request's status, computed tokens, outputs, KV blocks and their
sources; the encoder cache's entries, references and free slots; the worker's held
hashes; the encoder's call count).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from exhaustive.search import Operation, clone_state
from properties.engine_strategies import Prompt, RawImage, describe
from spec.types import EngineConfig

#: A machine built by ``engine_machine`` (its class is local to that builder).
Machine = Any

#: The image universe: A and D have the same shape and different pixels (a prefix cache
#: keyed by tokens alone aliases them), B has a break token (``is_embed``), X is too
#: large for any configuration of the scope (it must be rejected at admission).
IMAGES = (
    RawImage("A", b"A" * 16, 2, None),
    RawImage("B", b"B" * 16, 2, (False, True)),
    RawImage("D", b"D" * 16, 2, None),
    RawImage("X", b"X" * 16, 4, None),
)


@dataclass(frozen=True)
class PromptSpec:
    prompt: Prompt
    max_new: int


#: The prompts requests are made of: an image at position 0 with a decode of two
#: tokens; its same-shape twin (prefix aliasing, SYS-6); text then A (shared across
#: requests: a hit) then B (adjacent images, a doorstep); the same image twice; and an
#: image no configuration can run.
PROMPTS = (
    PromptSpec(("A", (0,)), 2),
    PromptSpec(("D", (0,)), 2),
    PromptSpec(((1,), "A", "B"), 1),
    PromptSpec(("B", (2,), "B"), 1),
    PromptSpec(("X",), 1),
)

#: Configurations (block size 2): roomy; tight (images span steps, evictions, stalls);
#: chunked multimodal input disabled; a KV cache too small for two requests
#: (preemption); prefix caching off; a one-token budget.
CONFIGS = (
    EngineConfig(4, 3, 4, 8, 2, 2, True, False),
    EngineConfig(2, 2, 2, 8, 2, 2, True, False),
    EngineConfig(3, 3, 3, 8, 2, 2, True, True),
    EngineConfig(4, 3, 4, 3, 2, 2, True, False),
    EngineConfig(4, 2, 3, 8, 2, 2, False, False),
    EngineConfig(1, 2, 2, 8, 2, 2, True, False),
)


#: With a drafter (``EngineDrafterMachine``, SYS-13 and SYS-14): the look-ahead's doorstep
#: with two images that do not fit the encoder budget together (V21's doorstep form);
#: the ``disable_chunked_mm_input`` rollback with a budget of one image (its rollback
#: form); k = 2 with a token budget of one decode and its two drafts, where a chunk of
#: [1 A D] ends where D starts (the look-ahead's item, affordable: served) and drafts
#: are accepted, rejected and cut by the budget.
DRAFTER_CONFIGS = (
    EngineConfig(2, 2, 2, 8, 2, 2, True, False, 1),
    EngineConfig(2, 3, 4, 8, 2, 2, True, True, 1),
    EngineConfig(3, 4, 4, 8, 2, 2, True, False, 2),
)

#: The drafter's prompts: an image then three text tokens, four tokens to generate
#: (``draft_token_id`` guesses its output 1 wrong, 2 and 3 right: drafts rejected, then
#: accepted); text, A, B (the look-ahead into the adjacent image, whose first position
#: is a break token) and text, A, D (into one whose first position is an embedding);
#: the same image twice around a text token; the never-admissible X.
DRAFTER_PROMPTS = (
    PromptSpec(("A", (0, 1, 2)), 4),
    PromptSpec(((1,), "A", "B"), 1),
    PromptSpec(((1,), "A", "D"), 1),
    PromptSpec(("B", (2,), "B"), 2),
    PromptSpec(("X",), 1),
)


@dataclass(frozen=True)
class EngineScope:
    """The scenarios and depth of the search (SPEC.md "## Exhaustive scopes")."""

    configs: tuple[EngineConfig, ...] = CONFIGS
    prompts: tuple[PromptSpec, ...] = PROMPTS
    max_requests: int = 3
    depth: int = 5

    def describe(self) -> str:
        configs = config_list(self.configs)
        prompts = ", ".join(f"[{describe(p.prompt)}]x{p.max_new}" for p in self.prompts)
        return (
            f"engine loop: configurations {configs}; prompts {prompts} "
            f"(A, D: 2 tokens, same shape; B: 2 tokens, 1 embedding; X: 4 tokens); up to "
            f"{self.max_requests} requests; up to {self.depth} operations"
        )


def _config(config: EngineConfig) -> str:
    flags = "" if config.enable_prefix_caching else ", no prefix caching"
    if config.disable_chunked_mm_input:
        flags += ", chunked mm input off"
    if config.num_speculative_tokens:
        flags += f", drafter k={config.num_speculative_tokens}"
    return (
        f"T={config.token_budget} E={config.encoder_compute_budget} "
        f"C={config.encoder_cache_size} {config.num_kv_blocks} blocks of "
        f"{config.block_size}{flags}"
    )


class EngineSpace:
    """One configuration: ``machine_class`` is the property's ``EngineMachine``."""

    def __init__(
        self, machine_class: Callable[[], Machine], config: EngineConfig, scope: EngineScope
    ) -> None:
        self.machine_class = machine_class
        self.config = config
        self.scope = scope
        self.description = _config(config)

    def start(self) -> Machine:
        machine = self.machine_class()
        machine.setup((self.config, IMAGES))
        return machine

    def after(self, machine: Machine) -> None:
        """Nothing more: the machine checks every invariant inside each operation."""

    def clone(self, machine: Machine) -> Machine:
        return clone_state(machine, _STATE, (self.config, IMAGES, *IMAGES))

    def operations(self, machine: Machine) -> list[Operation[Machine]]:
        ops: list[Operation[Machine]] = []
        live: list[str] = sorted(machine.model.live)
        if machine.next_id - 1 < self.scope.max_requests:
            for spec in self.scope.prompts:
                ops.append(
                    Operation(
                        f"add r{machine.next_id}: [{describe(spec.prompt)}], "
                        f"{spec.max_new} to generate",
                        _add(spec),
                    )
                )
        if live:
            ops.append(Operation("one step", _step))
            ops.append(Operation("drain (steps until every request finishes)", _drain))
        for request_id in live:
            ops.append(Operation(f"abort {request_id}", _abort(request_id)))
            ops.append(Operation(f"preempt {request_id}", _preempt(request_id)))
        gone = sorted(machine.model.finished | machine.model.aborted)
        if gone:
            ops.append(Operation(f"abort {gone[0]} again (gone)", _abort(gone[0])))
        return ops

    def key(self, machine: Machine) -> Hashable:
        model = machine.model
        snapshot = machine.eng.snapshot()
        progress = tuple(
            (
                rid,
                machine.prompt_of[rid],
                model.facts[rid].request.max_new_tokens,
                p.computed,
                p.running,
                p.start,
                p.outputs,
                tuple(sorted(p.touched)),
                p.prefill_done,
            )
            for rid, p in sorted(model.progress.items())
        )
        requests = tuple(
            (
                rid,
                r.status,
                r.num_computed_tokens,
                r.output_token_ids,
                r.kv_block_ids,
                r.kv_sources,
            )
            for rid, r in sorted(snapshot.requests.items())
        )
        return (
            machine.next_id,
            progress,
            tuple(sorted(model.finished)),
            tuple(sorted(model.aborted)),
            frozenset(machine.prompts),
            tuple(machine.idle_order),
            machine.solo,
            requests,
            snapshot.num_kv_blocks_in_use,
            tuple(sorted((h, tuple(sorted(i))) for h, i in snapshot.encoder_cache_refs.items())),
            snapshot.encoder_cache_free_slots,
            tuple(sorted(snapshot.worker_held)),
            snapshot.encoder_num_calls,
        )


#: The machine's attributes that change as it runs.
_STATE = (
    "engine",
    "model",
    "prompts",
    "prompt_of",
    "next_id",
    "steps",
    "solo",
    "idle_order",
    "idle_clock",
    "pipeline",
)


def _add(spec: PromptSpec) -> Callable[[Machine], None]:
    return lambda machine: machine.add_prompt(spec.prompt, spec.max_new)


def _step(machine: Machine) -> None:
    machine.run_step()


def _drain(machine: Machine) -> None:
    machine.drain()


def _abort(request_id: str) -> Callable[[Machine], None]:
    return lambda machine: machine.abort(request_id)


def _preempt(request_id: str) -> Callable[[Machine], None]:
    return lambda machine: machine.preempt_one(request_id)


def config_list(configs: Sequence[EngineConfig]) -> str:
    return "; ".join(_config(c) for c in configs)
