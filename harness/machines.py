"""The state machines, shipped for third parties to run inside their own pytest suites.

In the style of ``zarr.testing.stateful``: no adapter module, no command line — a
factory in, a Hypothesis ``RuleBasedStateMachine`` out, whose ``TestCase`` pytest or
unittest collects::

    from mmspec.harness.machines import encoder_cache     # installed; harness.machines
                                                          # from a checkout
    TestMyCache = encoder_cache(lambda size: MyCache(size), reset=True).TestCase

A violation raises :class:`~properties.framework.ClauseViolation` — of a subclass named
after its clause (``ClauseViolation[ECM-5]``), with the clause id as ``.clause`` — and
Hypothesis shrinks it to a minimal program of the machine's rules, narrated. Settings are
the caller's (``TestMyCache.settings = settings(max_examples=...)``, or a loaded
Hypothesis profile) — left alone, that is Hypothesis' default of 100 programs of up to
50 steps with the explain phase: half the programs the command line runs (``verify
--profile ci`` gives every machine but the item cache's 200 programs of 30 steps,
derandomized, without the explain phase's slow tracing), so a bug the command line
catches may slip by, more slowly. :func:`mmspec_settings` gives a machine the command
line's settings::

    Machine = encoder_cache(lambda size: MyCache(size))
    TestMyCache = Machine.TestCase
    TestMyCache.settings = mmspec_settings(Machine)        # or mmspec_settings(Machine, "dev")

``item_cache(factory)`` is FIC-1..4's machine the same way, over the front-end item
cache pair (``spec.components.ItemCache``); ``embedding_cache(factory)`` EMB-1 and
EMB-2's, over a content-keyed embedding cache (``spec.components.EmbeddingCache``);
``engine_resets(factory)`` SYS-1..12's ``EngineResetMachine``, over an engine loop with
the optional resets (``ResettableEngine``) and/or weight updates (``WeightUpdatableEngine``);
``engine_drafter(factory)`` SYS-1..10, SYS-13 and SYS-14's ``EngineDrafterMachine``, over an
engine loop that runs a drafter (``SpeculativeEngine``); ``engine_async(factory)``
SYS-1..10 and SYS-15's ``EngineAsyncMachine``, over one that schedules a step ahead of
its worker (``AsyncEngine``); ``engine_async_drafter(factory)`` SYS-1..10 and
SYS-13..15's ``EngineAsyncDrafterMachine``, over one that does both at once;
``engine_hybrid(factory)`` SYS-1..10 and SYS-16's ``EngineHybridMachine``, over one that
serves a hybrid model, its chunks aligned to the recurrent state's blocks (``HybridEngine``).

Optional capabilities are explicit flags: ``reset`` (ECM-9's ``reset()``) and
``bookkeeping`` (ECM-8's ``tracked_request_ids()``/``tracked_mm_hashes()``). ``True``
requires them (a factory whose product lacks one is refused before any example runs),
``False`` hides them from the machine, ``None`` (the default) uses them when present,
as the command line does.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine

from harness.loader import REFERENCE_REF, build_parts, load_adapter
from harness.profiles import profile_settings
from properties.embedding_cache_machine import embedding_cache_machine
from properties.encoder_cache_machine import encoder_cache_machine
from properties.encoder_cache_scenarios import BOOKKEEPING, RESET, provides
from properties.engine_async_drafter_machine import (
    async_drafter_probe,
    engine_async_drafter_machine_class,
)
from properties.engine_async_machine import async_probe, engine_async_machine_class
from properties.engine_drafter_machine import drafter_probe, engine_drafter_machine_class
from properties.engine_hybrid_machine import engine_hybrid_machine_class, hybrid_probe
from properties.engine_machine import ENGINE_MIN_PROGRAMS, engine_machine
from properties.engine_reset_machine import (
    engine_reset_machine_class,
    resets_probe,
    weights_probe,
)
from properties.framework import Parts, Runnable, machine, machine_settings
from properties.item_cache_machine import item_cache_machine
from spec.adapter import Adapter, EngineParts
from spec.components import EmbeddingCache, EncoderCacheManager, EngineLoop, ItemCache
from spec.types import EngineConfig


class _Hiding:
    """``inner`` with the members ``hidden`` removed (a capability the caller turned
    off); everything else is the inner object's."""

    def __init__(self, inner: object, hidden: frozenset[str]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_hidden", hidden)

    def __getattr__(self, name: str) -> Any:
        if name in object.__getattribute__(self, "_hidden"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "_inner"), name)


def _with_capabilities(
    factory: Callable[[int], EncoderCacheManager], reset: bool | None, bookkeeping: bool | None
) -> Callable[[int], EncoderCacheManager]:
    wanted = {"reset": (reset, RESET), "bookkeeping": (bookkeeping, BOOKKEEPING)}
    probe = factory(1)
    for flag, (value, methods) in wanted.items():
        if value and not provides(probe, methods):
            names = ", ".join(f"{m}()" for m in methods)
            raise TypeError(f"{flag}=True, but the cache manager does not provide {names}")
    hidden = frozenset(m for value, methods in wanted.values() if value is False for m in methods)
    if not hidden:
        return factory

    def hiding(size: int) -> EncoderCacheManager:
        hidden_view: Any = _Hiding(factory(size), hidden)
        return hidden_view  # type: ignore[no-any-return]

    return hiding


def encoder_cache(
    factory: Callable[[int], EncoderCacheManager],
    *,
    reset: bool | None = None,
    bookkeeping: bool | None = None,
) -> type[RuleBasedStateMachine]:
    """ECM-1..9's machine (``EncoderCacheMachine``) over ``factory(cache_size)``."""
    adapter = Adapter(
        name="encoder_cache", encoder_cache_manager=_with_capabilities(factory, reset, bookkeeping)
    )
    return _machine_class(encoder_cache_machine(build_parts(adapter, None)))


def item_cache(factory: Callable[[int], ItemCache]) -> type[RuleBasedStateMachine]:
    """FIC-1..4's machine (``ItemCacheMachine``) over ``factory(capacity_in_bytes)``: the
    front-end item cache pair (``spec.components.ItemCache``)."""
    adapter = Adapter(name="item_cache", item_cache=factory)
    return _machine_class(item_cache_machine(build_parts(adapter, None)))


def embedding_cache(factory: Callable[[int], EmbeddingCache]) -> type[RuleBasedStateMachine]:
    """EMB-1 and EMB-2's machine (``EmbeddingCacheMachine``) over
    ``factory(capacity_in_bytes)``: a content-keyed embedding cache without references
    (``spec.components.EmbeddingCache``, SGLang's ``MultiModalStaticCache``)."""
    adapter = Adapter(name="embedding_cache", embedding_cache=factory)
    return _machine_class(embedding_cache_machine(build_parts(adapter, None)))


def engine(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..10's machine (``EngineMachine``) over ``factory(config, parts)``; the
    components it is handed are ``components`` (``hasher=...``, ``encoder=...``, ...)
    where given, the reference's elsewhere."""
    return _machine_class(engine_machine(_engine_parts(factory, components)))


def engine_resets(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..12's machine (``EngineResetMachine``) over ``factory(config, parts)``: the
    engine machine with ``reset_encoder_cache``/``reset_prefix_cache`` (SYS-11) and
    ``update_weights`` (SYS-12) between steps, whichever the engine has; an engine with
    neither is refused."""
    parts = _engine_parts(factory, components)
    no_resets, no_updates = resets_probe(parts), weights_probe(parts)
    if no_resets and no_updates:
        raise TypeError(f"engine_resets needs resets or weight updates: {no_resets}; {no_updates}")
    built = engine_reset_machine_class(parts, no_resets is None, no_updates is None)
    return _machine_class(machine(built, min_programs=ENGINE_MIN_PROGRAMS))


def engine_drafter(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..10, SYS-13 and SYS-14's machine (``EngineDrafterMachine``) over
    ``factory(config, parts)`` built with a drafter (``num_speculative_tokens`` 1 or 2);
    an engine without one is refused."""
    parts = _engine_parts(factory, components)
    lacking = drafter_probe(parts)
    if lacking:
        raise TypeError(f"engine_drafter needs a drafter: {lacking}")
    return _machine_class(
        machine(engine_drafter_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)
    )


def engine_async(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..10 and SYS-15's machine (``EngineAsyncMachine``) over
    ``factory(config, parts)`` built with ``async_scheduling=True``; an engine without
    async scheduling is refused."""
    parts = _engine_parts(factory, components)
    lacking = async_probe(parts)
    if lacking:
        raise TypeError(f"engine_async needs async scheduling: {lacking}")
    return _machine_class(
        machine(engine_async_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)
    )


def engine_async_drafter(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..10 and SYS-13..15's machine (``EngineAsyncDrafterMachine``) over
    ``factory(config, parts)`` built with ``async_scheduling=True`` and a drafter
    (``num_speculative_tokens`` 1 or 2); an engine without both, or that refuses the
    pair, is refused."""
    parts = _engine_parts(factory, components)
    lacking = async_drafter_probe(parts)
    if lacking:
        raise TypeError(f"engine_async_drafter needs async scheduling and a drafter: {lacking}")
    return _machine_class(
        machine(engine_async_drafter_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)
    )


def engine_hybrid(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    **components: Callable[..., Any],
) -> type[RuleBasedStateMachine]:
    """SYS-1..10 and SYS-16's machine (``EngineHybridMachine``) over
    ``factory(config, parts)`` built with ``mamba_block_aligned=True``; an engine that
    does not serve hybrid models is refused."""
    parts = _engine_parts(factory, components)
    lacking = hybrid_probe(parts)
    if lacking:
        raise TypeError(f"engine_hybrid needs a hybrid-model engine: {lacking}")
    return _machine_class(
        machine(engine_hybrid_machine_class(parts), min_programs=ENGINE_MIN_PROGRAMS)
    )


def _engine_parts(
    factory: Callable[[EngineConfig, EngineParts], EngineLoop],
    components: dict[str, Callable[..., Any]],
) -> Parts:
    known = {"hasher", "encoder", "encoder_cache_manager", "scheduling_hook", "block_hasher",
             "worker_store"}
    unknown = sorted(set(components) - known)
    if unknown:
        raise TypeError(f"not components of the engine: {', '.join(unknown)}")
    adapter: Any = Adapter(name="engine", engine_loop=factory)
    adapter = dataclasses.replace(adapter, **components)
    reference = load_adapter(REFERENCE_REF).adapter
    return build_parts(adapter, reference)


#: Each machine class these functions made -> the fewest programs the command line runs
#: it for (``Runnable.min_programs``).
_MIN_PROGRAMS: weakref.WeakKeyDictionary[type[RuleBasedStateMachine], int] = (
    weakref.WeakKeyDictionary()
)


def mmspec_settings(machine: type[RuleBasedStateMachine], profile: str = "ci") -> settings:
    """The settings ``python -m properties verify --profile PROFILE`` runs ``machine`` (a
    class made by a function of this module) under: mmspec's own settings object for
    the profile (never a registered Hypothesis profile, so the caller's stay as they are),
    with the machine's examples as the command line counts them. Without a database, as
    ``harness.profiles.profile_settings`` gives them; set ``database=`` to keep failures."""
    if machine not in _MIN_PROGRAMS:
        raise ValueError(
            f"{machine.__name__} was not made by harness.machines (encoder_cache, engine, ...)"
        )
    return machine_settings(profile_settings(profile), _MIN_PROGRAMS[machine])


def _machine_class(runnable: Runnable) -> type[RuleBasedStateMachine]:
    machine = runnable.machine_class
    assert machine is not None, "properties.framework.machine sets it"
    _MIN_PROGRAMS[machine] = runnable.min_programs
    return machine
