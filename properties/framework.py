"""How a property is declared, what it receives, and how it reports a violation.

A property is a function registered with :func:`clause_property`. It receives
:class:`Parts` (one factory per component: the adapter's where it has one, the
reference's elsewhere) and returns a :class:`Runnable` built with :func:`stateless`
(a ``@given`` test) or :func:`machine` (a ``RuleBasedStateMachine`` class). The runner
applies the profile's settings, runs it, and turns the outcome into clause verdicts.

A property states its clause with :func:`check`, which raises :class:`ClauseViolation`
naming the clause. Any other exception escaping a run is an *error* of the
implementation, not a clause verdict: the zoo meta-tests insist that every bug is
caught by a failed clause assertion.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from hypothesis import Phase
from hypothesis import note as _hypothesis_note
from hypothesis import reject as _reject
from hypothesis import reproduce_failure as _reproduce_failure
from hypothesis import seed as _seed
from hypothesis import settings as Settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    run_state_machine_as_test,
)

from spec.adapter import EngineParts
from spec.components import (
    BlockHasher,
    EmbeddingCache,
    Encoder,
    EncoderCacheManager,
    EncoderDecoderCacheManager,
    EngineLoop,
    FeatureHasher,
    Hasher,
    ItemCache,
    Processor,
    SchedulingHook,
    SelfManagedWorkerStore,
    Splice,
    WorkerStore,
)
from spec.types import EngineConfig, ProcessorConfig, SchedulerConfig

T = TypeVar("T")
R = TypeVar("R")

ComponentName = Literal[
    "processor",
    "hasher",
    "feature_hasher",
    "encoder",
    "encoder_cache_manager",
    "encoder_decoder_cache_manager",
    "splice",
    "scheduling_hook",
    "block_hasher",
    "item_cache",
    "embedding_cache",
    "worker_store",
    "engine_loop",
]


class ClauseViolation(AssertionError):
    """A clause of SPEC.md does not hold. The message is in the spec's vocabulary.

    ``ClauseViolation(clause, ...)`` is an instance of a subclass of its own per clause:
    Hypothesis tells failures apart by exception type and raise site, and every
    violation is raised from :func:`check`, so without it the violations of different
    clauses would count as one bug and shrinking could trade one clause for another.
    """

    def __new__(cls, clause: str, message: str) -> ClauseViolation:
        if cls is ClauseViolation:
            cls = _violation_type(clause)
        return super().__new__(cls, clause, message)

    def __init__(self, clause: str, message: str) -> None:
        super().__init__(f"[{clause}] {message}")
        self.clause = clause
        self.detail = message


@functools.cache
def _violation_type(clause: str) -> type[ClauseViolation]:
    return type(f"ClauseViolation[{clause}]", (ClauseViolation,), {"__module__": __name__})


def check(condition: bool, clause: str, message: str) -> None:
    """Assert ``condition``; otherwise raise :class:`ClauseViolation` for ``clause`` —
    unless the run sets ``clause`` aside (:func:`setting_aside`): then the test case is
    rejected as invalid, so that it can judge no other clause."""
    if not condition:
        if _SET_ASIDE and clause in _SET_ASIDE[-1]:
            _reject()
        raise ClauseViolation(clause, message)


#: The clauses the innermost :func:`setting_aside` sets aside.
_SET_ASIDE: list[frozenset[str]] = []


def is_set_aside(clause: str) -> bool:
    """Whether the current run sets ``clause`` aside. A check whose violation leaves
    the implementation's observable state where the model is (a leak the model does not
    track) may be skipped then, instead of rejecting every later test case."""
    return bool(_SET_ASIDE) and clause in _SET_ASIDE[-1]


@contextmanager
def setting_aside(clauses: Iterable[str]) -> Iterator[None]:
    """Run with the violations of ``clauses`` set aside: a test case that breaks one of
    them is rejected (Hypothesis' ``reject``) from the moment it does, and judges
    nothing after it. Every clause still checked is then judged on the test cases in
    which the set-aside clauses held up to its own check: each check compares the
    implementation with the model, so such a case is one the model followed step by
    step, and a violation found there is the clause's own (the runner's per-clause
    verdicts, issue 14)."""
    _SET_ASIDE.append(frozenset(clauses))
    try:
        yield
    finally:
        _SET_ASIDE.pop()


#: Where :func:`note` writes outside Hypothesis: the innermost :func:`collect_notes`.
_NOTE_SINKS: list[list[str]] = []


def note(text: str) -> None:
    """Narrate a step of a counterexample in the spec's vocabulary.

    Inside a Hypothesis test this is Hypothesis' ``note`` (printed with the shrunk
    failing example). Under :func:`collect_notes` (the exhaustive checker drives the
    same machines without Hypothesis) the line goes to the collector instead, so that a
    violation's shortest path is told with the very same words."""
    if _NOTE_SINKS:
        _NOTE_SINKS[-1].append(text)
    else:
        _hypothesis_note(text)


@contextmanager
def collect_notes() -> Iterator[list[str]]:
    """Collect :func:`note` lines into the yielded list instead of Hypothesis' notes."""
    lines: list[str] = []
    _NOTE_SINKS.append(lines)
    try:
        yield lines
    finally:
        _NOTE_SINKS.pop()


#: The name under which a component that lives elsewhere (the grader's proxy of an
#: isolated child, harness/isolation/proxy.py) answers several calls of one method in few
#: exchanges: ``type(owner).<name>(owner, member, calls)`` -> an iterator as below.
CALL_EACH = "_mmspec_call_each"


def answers(method: Callable[..., R], calls: Iterable[tuple[Any, ...]]) -> Iterator[R]:
    """``method(*arguments)`` for each argument tuple of ``calls``, in order, lazily:
    exactly the calls a loop would make, each when its answer is taken, and an exception
    raised where its call would have raised.

    For calls a property makes in a row with nothing between them that touches the
    component (the cache manager's ``get_cached_input_ids`` of every live request after
    each step, PFX-5's birthday search). When the component lives in the isolated child,
    its proxy sends them in batches, one exchange each: the child makes the same calls in
    the same order and stops at the first that raises, so the component sees the calls
    it would see in a loop (the rest of a batch after a failed check, whose run ends
    there, are the only calls made early)."""
    owner = getattr(method, "__self__", None)
    each = getattr(type(owner), CALL_EACH, None) if owner is not None else None
    if each is None:
        return (method(*arguments) for arguments in calls)
    batched: Iterator[R] = each(owner, method.__name__, calls)
    return batched


def expect_error(
    clause: str, error_type: type[BaseException], action: Callable[[], object], what: str
) -> BaseException:
    """Run ``action`` and insist it raises ``error_type``; a silent return or another
    exception type is a violation of ``clause`` (typed errors are part of the spec)."""
    try:
        action()
    except error_type as e:
        return e
    except Exception as e:  # noqa: BLE001 - any other type is the violation we report
        raise ClauseViolation(
            clause, f"{what}: expected {error_type.__name__}, got {type(e).__name__}: {e}"
        ) from e
    raise ClauseViolation(clause, f"{what}: expected {error_type.__name__}, nothing was raised")


@dataclass(frozen=True)
class Parts:
    """The component factories a property may use, and who implements each."""

    processor: Callable[[ProcessorConfig], Processor]
    hasher: Callable[[], Hasher]
    feature_hasher: Callable[[], FeatureHasher]
    encoder: Callable[[int], Encoder]
    encoder_cache_manager: Callable[[int], EncoderCacheManager]
    encoder_decoder_cache_manager: Callable[[int], EncoderDecoderCacheManager]
    splice: Callable[[], Splice]
    scheduling_hook: Callable[[SchedulerConfig], SchedulingHook]
    block_hasher: Callable[[int], BlockHasher]
    item_cache: Callable[[int], ItemCache]
    embedding_cache: Callable[[int], EmbeddingCache]
    worker_store: Callable[[], WorkerStore]
    engine_loop: Callable[[EngineConfig, EngineParts], EngineLoop]
    #: component name -> the name of the implementation behind it
    provenance: dict[str, str] = field(default_factory=dict)
    #: the worker store an engine loop is given, where it is not ``worker_store``: the
    #: reference's engine loop standing in beside a store that keeps its own cache
    #: (:func:`harness.loader.build_parts`)
    engine_worker_store: Callable[[], WorkerStore] | None = None

    def engine_parts(self) -> EngineParts:
        return EngineParts(
            hasher=self.hasher,
            encoder=self.encoder,
            encoder_cache_manager=self.encoder_cache_manager,
            scheduling_hook=self.scheduling_hook,
            block_hasher=self.block_hasher,
            worker_store=self.engine_worker_store or self.worker_store,
        )


# --- what a capability probe builds ---------------------------------------------------------


def probed_product(product: T, protocol: type, component: ComponentName) -> T:
    """``product``, built by a capability probe (:attr:`PropertySpec.capabilities`), once
    it is shown to be a ``component`` at all. A probe judges an *optional* capability, and
    "the adapter does not provide it" is true only of an object that is the component: a
    factory that returned something else (``None``, say) raises here, so that the runner
    reports the property as an ``ERROR`` with this exception, never as "not provided"
    (issue 32)."""
    if not isinstance(product, protocol):
        # the type's name only: the object's own repr is the implementation's code
        shown = "None" if product is None else f"a {type(product).__qualname__}"
        raise TypeError(
            f"the {component} factory returned {shown}, which does not meet the "
            f"{protocol.__name__} Protocol (spec/components.py)"
        )
    return product


def keeps_own_cache(store: object) -> bool:
    """Whether a worker store declares a content-keyed cache of its own
    (``SelfManagedWorkerStore.self_managed()`` is True): WRK-1, WRK-2 and WRK-5 do not
    apply to it, and an engine loop standing in is not given it (harness.loader)."""
    return isinstance(store, SelfManagedWorkerStore) and store.self_managed() is True


def probed_engine(parts: Parts, config: EngineConfig) -> EngineLoop:
    """A fresh engine loop for a capability probe, shown to be one: an ``EngineLoop``
    whose ``snapshot()`` answers. Isolated, the grader's proxy has every member of the
    Protocol whatever the child's factory returned, so only a call tells that the child
    holds no engine; the snapshot comes back with the build (it costs no round trip)."""
    engine = probed_product(parts.engine_loop(config, parts.engine_parts()), EngineLoop,
                            "engine_loop")
    engine.snapshot()
    return engine


@dataclass
class Runnable:
    """A property ready to run under a settings object.

    ``examples`` counts test cases (stateless) or machine runs (stateful);
    ``transitions`` counts the machine's declared transitions, recorded from the model.
    """

    run: Callable[[Settings], None]
    examples: int = 0
    transitions: Counter[str] = field(default_factory=Counter)
    machine_name: str | None = None
    #: Set by the runner before ``run``: an explicit Hypothesis seed (it overrides
    #: ``derandomize``: another, equally repeatable run), and ``(version, blob)`` of a
    #: ``@reproduce_failure`` to replay exactly one recorded test case.
    seed: int | None = None
    replay: tuple[str, bytes] | None = None
    #: The property as a fuzz target under a settings object — Hypothesis'
    #: ``fuzz_one_input``, which runs one test case (one program, for a machine) from a
    #: byte string and saves a failing one to the settings' database under the key a
    #: normal run of the same test replays (``fuzz/``, docs/fuzz.md).
    fuzz_target: Callable[[Settings], Callable[[bytes], bytes | None]] | None = None
    #: For a machine: the class itself (its instances count in ``examples`` and record
    #: into ``transitions``), for drivers other than Hypothesis (the exhaustive checker).
    machine_class: type[RuleBasedStateMachine] | None = None
    #: For a machine: the fewest programs it runs, whatever the profile's ``max_examples``
    #: (:func:`machine`, :func:`machine_settings`).
    min_programs: int = 0
    #: What the run leaves out of its clauses because the adapter declares it does not
    #: serve it (PFX-7's identity kinds an engine's prefix cache refuses): printed beside
    #: the verdict, which stays the clause's on what was drawn. Empty: the whole clause.
    scope: str = ""


#: ``Runnable.replay`` for a failure found in an explicit ``@example``, for which
#: Hypothesis prints no ``@reproduce_failure`` blob: the explicit examples alone are run
#: again, stopping at the first that fails (a stateless property only).
EXPLICIT_EXAMPLES: tuple[str, bytes] = ("explicit examples", b"")

#: Called at the start of every test case of a stateless property (:func:`each_example`).
_EXAMPLE_STARTED: list[Callable[[], None]] = []


@contextmanager
def each_example(started: Callable[[], None]) -> Iterator[None]:
    """Call ``started`` at the start of every test case of the stateless properties run
    inside (the grader's recorder keeps the calls of the last one: with
    :data:`EXPLICIT_EXAMPLES`, the failing explicit example)."""
    _EXAMPLE_STARTED.append(started)
    try:
        yield
    finally:
        _EXAMPLE_STARTED.remove(started)


def _apply_overrides(runnable: Runnable, target: Any) -> None:
    """Seed or replay ``target`` (a ``@given`` test or a machine class) through
    Hypothesis' public decorators, as ``runnable`` asks."""
    if runnable.seed is not None:
        _seed(runnable.seed)(target)
    if runnable.replay is not None and runnable.replay != EXPLICIT_EXAMPLES:
        _reproduce_failure(*runnable.replay)(target)


def stateless(test: Any) -> Runnable:
    """Wrap a ``@given`` test function (no arguments left to supply)."""
    runnable = Runnable(run=lambda s: None)
    inner = test.hypothesis.inner_test

    @functools.wraps(inner)
    def counted(*args: Any, **kwargs: Any) -> None:
        runnable.examples += 1
        for started in _EXAMPLE_STARTED:
            started()
        inner(*args, **kwargs)

    # Hypothesis documents replacing ``inner_test`` for wrappers like this one.
    test.hypothesis.inner_test = counted

    def run(profile: Settings) -> None:
        if runnable.replay == EXPLICIT_EXAMPLES:
            profile = Settings(profile, phases=(Phase.explicit,), report_multiple_bugs=False)
        target = profile(test)
        _apply_overrides(runnable, target)
        target()

    def fuzz_target(profile: Settings) -> Callable[[bytes], bytes | None]:
        target = profile(test)
        _apply_overrides(runnable, target)
        fuzz_one_input: Callable[[bytes], bytes | None] = target.hypothesis.fuzz_one_input
        return fuzz_one_input

    runnable.run = run
    runnable.fuzz_target = fuzz_target
    return runnable


class TransitionRecorder:
    """Mixin for state machines: ``self.reached("eviction")`` records a transition the
    *model* made. The runner reads the counts after the run."""

    transition_counter: Counter[str] = Counter()

    def reached(self, transition: str, times: int = 1) -> None:
        type(self).transition_counter[transition] += times


def machine_settings(profile: Settings, min_programs: int) -> Settings:
    """``profile`` with at least ``min_programs`` examples (valid programs, for a
    machine): a floor, never a multiple, so that a profile that asks for more gets what it
    asks for."""
    if profile.max_examples >= min_programs:
        return profile
    return Settings(profile, max_examples=min_programs)


def machine(cls: type[RuleBasedStateMachine], min_programs: int = 0) -> Runnable:
    """Wrap a state machine class (a ``TransitionRecorder`` subclass). It runs at least
    ``min_programs`` programs under any profile (see its caller for why)."""
    runnable = Runnable(
        run=lambda s: None, machine_name=cls.__name__, min_programs=min_programs
    )
    counter = runnable.transitions

    class Counted(cls):  # type: ignore[valid-type, misc]
        transition_counter = counter

        def __init__(self) -> None:
            runnable.examples += 1
            super().__init__()

    Counted.__name__ = cls.__name__
    Counted.__qualname__ = cls.__qualname__
    runnable.machine_class = Counted

    def run(profile: Settings) -> None:
        _apply_overrides(runnable, Counted)
        run_state_machine_as_test(Counted, settings=machine_settings(profile, min_programs))

    def fuzz_target(profile: Settings) -> Callable[[bytes], bytes | None]:
        # The @given test run_state_machine_as_test runs (Hypothesis splits it out for
        # HypoFuzz): the same test, so the same database key as a normal run.
        _apply_overrides(runnable, Counted)
        test: Any = get_state_machine_test(Counted, settings=profile)
        fuzz_one_input: Callable[[bytes], bytes | None] = test.hypothesis.fuzz_one_input
        return fuzz_one_input

    runnable.run = run
    runnable.fuzz_target = fuzz_target
    return runnable


@dataclass(frozen=True)
class PropertySpec:
    """A registered property: the clauses it checks, the components under test
    (``subject``: absent from the adapter -> "not provided"), and other components it
    uses (``uses``: filled from the reference when absent). With ``subject_any`` the
    property runs when the adapter provides *any* subject component (a composite such
    as the engine machine, which checks whichever parts the adapter has inside the
    reference's composition), and is "not provided" only when it provides none."""

    name: str
    clauses: tuple[str, ...]
    subject: tuple[ComponentName, ...]
    uses: tuple[ComponentName, ...]
    build: Callable[[Parts], Runnable]
    module: str
    subject_any: bool = False
    #: Clauses that need an optional capability of a subject component: clause -> a
    #: probe returning why the adapter does not provide it (None: provided). Such a
    #: clause is "not provided" for that adapter; the property checks it only where the
    #: capability is there (spec/components.py, e.g. ``ResettableEncoderCache``).
    capabilities: tuple[tuple[str, Callable[[Parts], str | None]], ...] = ()


REGISTRY: dict[str, PropertySpec] = {}


def clause_property(
    name: str,
    clauses: str | Iterable[str],
    subject: Iterable[ComponentName],
    uses: Iterable[ComponentName] = (),
    subject_any: bool = False,
    capabilities: Iterable[tuple[str, Callable[[Parts], str | None]]] = (),
) -> Callable[[Callable[[Parts], Runnable]], Callable[[Parts], Runnable]]:
    """Register a property under ``name`` (the name SPEC.md's "Checked by" uses)."""
    clause_ids = (clauses,) if isinstance(clauses, str) else tuple(clauses)

    def register(build: Callable[[Parts], Runnable]) -> Callable[[Parts], Runnable]:
        if name in REGISTRY:
            raise ValueError(f"property {name} registered twice")
        REGISTRY[name] = PropertySpec(
            name=name,
            clauses=clause_ids,
            subject=tuple(subject),
            uses=tuple(uses),
            build=build,
            module=build.__module__,
            subject_any=subject_any,
            capabilities=tuple(capabilities),
        )
        return build

    return register
