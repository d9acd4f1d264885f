"""An isolated adapter: the child that runs it, and the grader-side ``Adapter`` of proxies.

:class:`IsolatedSession` starts the child, has it load (and check) the adapter, and
offers :attr:`IsolatedSession.loaded`, a :class:`~harness.loader.LoadedAdapter` whose
factories build proxies — so the runner, every property, the engine machine's
composition (the adapter's parts with the reference's, in the grader) and the grader
work unchanged. The adapter module itself is never imported by the grader.

Arrays are copies on each side; for the worker store, whose contract (WRK-3) is about
who may write into which array, the grader's writes are replayed into the child's
arrays before the next call on it (:data:`WRITE_BACK`), so that an implementation that
returns views into its storage, or keeps the caller's buffers, is caught as in process.

Limits: every request waits at most ``call_seconds``, and at most what is left of
``property_seconds`` (the wall-clock time this property has spent waiting for the
child). When the child dies or hits a limit, every further call *in this property*
raises :class:`~harness.isolation.proxy.ImplementationDied` with the same message from
the same place (so Hypothesis sees one failure and the run ends as an ERROR naming what
happened); :meth:`IsolatedSession.begin_property` starts a fresh child for the next
property. A child that has used more than half of its CPU-time allowance is replaced
there too, so that each property has at least half of it.

Over 400 lines (427) because the child's whole life (start, calls, deadlines, deaths and
what each is reported as) is one state machine, read in one place.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.isolation import wire
from harness.isolation.extensions import extension_protocols
from harness.isolation.proxy import (
    BadReturnValue,
    Check,
    ImplementationDied,
    Proxy,
    proxy_class,
    rebuilt_error,
)
from harness.isolation.sandbox import SandboxUser
from harness.isolation.standins import StandIns
from harness.isolation.supervisor import Child, ChildGone, Limits, size_text
from harness.loader import (
    NOT_PROVIDED,
    REFERENCE_REF,
    AdapterLoadError,
    LoadedAdapter,
    adapter_identity,
    build_parts,
    fallback_for,
    load_adapter,
    protocol_members,
)
from properties.framework import Parts
from spec.adapter import COMPONENTS, Adapter

#: How much of the submission's output a report shows (its tail).
OUTPUT_SHOWN = 4000
#: How much of it a load error quotes when the child died while loading the adapter.
_LOAD_OUTPUT_SHOWN = 1500

#: Components whose arrays are written back (WRK-3: the caller owns a gathered result and
#: may reuse the encoder outputs it handed over; an implementation that aliases them must
#: be caught isolated as in process): the grader's writes into arrays that crossed in
#: calls on them are replayed into the child's before the next call.
WRITE_BACK = frozenset({"worker_store"})

#: How many calls of :meth:`IsolatedSession.call_each` go in one exchange: few enough
#: that a batch's frames stay small (PFX-5's birthday search makes 131,072 calls), and
#: the calls made early after a failing check few.
CALLS_PER_EXCHANGE = 256

#: How many such arrays are tracked (the most recent; each is compared before a call).
TRACKED_ARRAYS = 64


class ProxyFactory:
    """A component factory whose products live in the child."""

    def __init__(self, session: IsolatedSession, component: str, owner: str) -> None:
        self.session = session
        self.component = component
        self.owner = owner

    def __call__(self, *args: Any) -> Any:
        if self.component == "engine_loop":
            args = args[:1]  # the child composes its own EngineParts (same choice of owners)
        return self.session.build(self.component, self.owner, args)


class IsolatedSession:
    """One adapter, run in a child process under ``limits``."""

    def __init__(
        self, adapter_ref: str, limits: Limits, fallback_ref: str | None = REFERENCE_REF
    ) -> None:
        self.adapter_ref = adapter_ref
        self.limits = limits
        #: the fallback whose components the grader stands in with (never loaded in the
        #: child: .standins); none in the student kit (no reference there)
        self.fallback_ref = fallback_for(fallback_ref)
        fallback = load_adapter(self.fallback_ref).adapter if self.fallback_ref else None
        self._fallback_factories: dict[str, Any] = {
            name: getattr(fallback, name)
            for name, _protocol in COMPONENTS
            if fallback is not None and getattr(fallback, name) is not None
        }
        self._stand_ins = StandIns({})
        #: how deep in nested exchanges (a stand-in calling the child back) we are
        self._depth = 0
        self._folder = Path(tempfile.mkdtemp(prefix="mmspec-isolated-"))
        self._output = (self._folder / "output.txt").open("w+b")
        self.generation = 0
        self.restarts = 0
        #: Requests sent, by operation and member (what a benchmark reads).
        self.requests: Counter[str] = Counter()
        self._child: Child | None = None
        self._drops: list[int] = []
        #: Counts requests: a property snapshot is good only for the stamp it came with.
        self._stamp = 0
        #: Arrays that crossed in worker-store calls: number -> (ours, bytes then).
        self._tracked: dict[int, tuple[Any, bytes]] = {}
        self._next_array = 0
        self._death: str | None = None
        self._used = 0.0
        #: The process that owns ``_child`` (a forked worker starts a child of its own).
        self._owner = os.getpid()
        #: The lock on the worker user a forked worker claimed (:meth:`_claim_worker_user`).
        self._claim: int | None = None
        try:
            self._info = self._start()
        except BaseException:
            self.close()
            raise
        self.loaded = self._loaded(self._info)

    # --- lifecycle ---------------------------------------------------------------------

    def _start(self) -> dict[str, Any]:
        if self._child is not None:
            self._child.close()
        self._child = Child(self.limits, self._output)
        self.generation += 1
        self._drops = []
        self._stand_ins.clear()
        stand_ins = list(self._fallback_factories)
        message: tuple[Any, ...] = ("load", [], self.adapter_ref, stand_ins)
        try:
            reply = self._child.request(message, self.limits.property_seconds)
        except ChildGone as e:
            failed = f"loading the adapter in the isolated child failed: {e}"
            raise AdapterLoadError(self.adapter_ref, [failed, *self._load_output()]) from None
        well_formed = isinstance(reply, tuple) and len(reply) == 2
        if well_formed and reply[0] == "load_error" and _strings(reply[1]):
            raise AdapterLoadError(self.adapter_ref, [*reply[1], *self._load_output()])
        info = reply[1] if well_formed and reply[0] == "ok" else None
        problem = _info_problem(info)
        if problem:
            self._child.kill("broke the protocol")
            raise AdapterLoadError(self.adapter_ref, [f"the isolated child {problem}"])
        assert isinstance(info, dict)
        # the grader builds, for the child, only what the adapter lacks: a stand-in of a
        # component it provides would be the reference graded as the submission's
        self._stand_ins.factories = {
            name: factory
            for name, factory in self._fallback_factories.items()
            if name not in info["provided"]
        }
        return info

    def _load_output(self) -> list[str]:
        """What the child printed while loading (often the why: a traceback), as a
        problem of its own, or nothing."""
        output = self.submission_output().strip()
        if not output:
            return []
        return [f"its output while loading ends:\n{output[-_LOAD_OUTPUT_SHOWN:]}"]

    def _loaded(self, info: dict[str, Any]) -> LoadedAdapter:
        factories: dict[str, Any] = {c: ProxyFactory(self, c, "adapter") for c in info["provided"]}
        adapter = Adapter(
            name=info["name"], not_attempted=frozenset(info["not_attempted"]), **factories
        )
        return LoadedAdapter(
            ref=self.adapter_ref,
            adapter=adapter,
            module_name=info["module_name"],
            origin=info["origin"],
            identity=adapter_identity(info["name"], info["origin"]),
        )

    def parts(self, fallback: Adapter | None, absent: str = NOT_PROVIDED) -> Parts:
        """The adapter's proxies, the fallback's components elsewhere, built here: one
        handed to the child (the reference's cache manager, given to the adapter's
        scheduling hook) crosses as a reference the child calls back (:mod:`.standins`).
        ``absent``: the provenance of components nobody provides (see build_parts)."""
        parts = build_parts(self.loaded.adapter, fallback, absent)
        provided = set(self._info["provided"])
        held = {
            name: self._stand_ins.tracked(name, getattr(parts, name))
            for name, _protocol in COMPONENTS
            if name not in provided and fallback is not None and getattr(fallback, name)
        }
        return replace(parts, **held)  # type: ignore[arg-type]  # factories, by name

    def begin_property(self, name: str) -> None:
        """Give the next property a live child and its full time allowance."""
        self._stand_ins.clear()
        self._used = 0.0
        self._death = None
        self._tracked.clear()
        if self._owner != os.getpid():
            self._leave_parents_child()
        child = self._child
        used = child.cpu_seconds_used() if child is not None and child.alive else None
        if child is not None and child.alive and (used or 0.0) <= self.limits.cpu_seconds / 2:
            try:
                self._ask("reset")
            except (ImplementationDied, BadReturnValue):
                pass
            if self._death is None and child.alive:
                return
            self._death = None
        self.restarts += 1
        try:
            info = self._start()
        except AdapterLoadError as e:
            self._death = f"restarting the child failed: {'; '.join(e.problems)}"
            if self._child is not None:  # never reused: it holds no adapter
                self._child.kill("its adapter did not load")
            return
        if (info["name"], info["provided"]) != (self._info["name"], self._info["provided"]):
            self._death = "the adapter loaded differently when the child was restarted"

    def workers(self, jobs: int) -> int:
        """How many forked workers may each run a child of their own: ``jobs``; under a
        sandbox user, one per worker user (:attr:`Limits.worker_sandboxes`), since burying
        a child kills every process of its user — and so one process where there is none."""
        if self.limits.sandbox is None:
            return jobs
        return max(1, min(jobs, len(self.limits.worker_sandboxes)))

    def _leave_parents_child(self) -> None:
        """In a process forked from the session's owner (the runner's ``jobs``): the
        inherited child is the parent's, so only this process's copy of its socket is
        closed (the parent keeps talking to it) and the next property starts a child of
        this process's own — under a sandbox, as a worker user this process claims."""
        self._owner = os.getpid()
        if self._child is not None:
            self._child.sock.close()
            self._child = None
        self._drops = []
        if self.limits.sandbox is not None:
            # never the parent's user: burying this worker's child would kill its child
            claimed = self._claim_worker_user()
            if claimed is None:  # workers() forks no more workers than there are users
                raise RuntimeError("no sandbox user is free for this forked worker's child")
            self.limits = replace(self.limits, sandbox=claimed)

    def _claim_worker_user(self) -> SandboxUser | None:
        """A worker user no other live worker holds: a lock on a file of its own in this
        session's folder (the grader's alone), held until this process ends, when the
        system releases it (a worker that died frees its user for its replacement)."""
        for index, user in enumerate(self.limits.worker_sandboxes):
            lock = self._folder / f"worker-user-{index}.lock"
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._claim = fd  # kept open: the lock is this process's while it lives
            return user
        return None

    def close(self) -> None:
        if self._owner != os.getpid():
            return  # a forked worker's copy: the child and the folder are the parent's
        if self._child is not None:
            self._child.close()
        self._output.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> IsolatedSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def submission_output(self) -> str:
        """The tail of everything the child wrote to stdout and stderr."""
        self._output.flush()
        data = (self._folder / "output.txt").read_bytes()
        text = data[-OUTPUT_SHOWN:].decode("utf-8", errors="replace")
        return text if len(data) <= OUTPUT_SHOWN else "[...]\n" + text

    # --- calls -------------------------------------------------------------------------

    def build(self, component: str, owner: str, args: tuple[Any, ...]) -> Proxy:
        raw = self._request("build", component, owner, self._encode(args))
        reply = self._decoded(raw)
        known = {
            name for p in extension_protocols(component) for name in protocol_members(p)
        }
        if not (
            isinstance(reply, tuple)
            and len(reply) == 2
            and type(reply[0]) is int
            and isinstance(reply[1], tuple)
            and all(type(n) is str and n in known for n in reply[1])
        ):
            raise BadReturnValue(f"building {component}: a malformed reply")
        proxy = proxy_class(component, reply[1])(self, reply[0], self.generation)
        self._remember(proxy, raw)
        return proxy

    def call(
        self,
        proxy: Proxy,
        member: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        check: Check | None = None,
    ) -> Any:
        self._current(proxy)
        track = proxy._component in WRITE_BACK
        writes = self._writes() if track else []
        sent = self._number_sent if track else None
        args_data = wire.to_wire(args, handle_of=self._handle_of, on_array=sent)
        kwargs_data = wire.to_wire(kwargs, handle_of=self._handle_of, on_array=sent)
        raw = self._request(
            "call", proxy._handle, member, args_data, kwargs_data, writes, track
        )
        self._remember(proxy, raw)
        return self._decoded(raw, self._keep if track else None, check)

    def call_each(
        self,
        proxy: Proxy,
        member: str,
        calls: Iterable[tuple[Any, ...]],
        check: Check | None = None,
    ) -> Iterator[Any]:
        """``member`` called with each argument tuple of ``calls`` in turn, in batches of
        :data:`CALLS_PER_EXCHANGE` (a batch is sent when its first answer is taken): each
        result decoded and checked as a call's, and the first error raised where its call
        stands (the child made no call after it)."""
        if proxy._component in WRITE_BACK:
            for args in calls:  # tracked arrays cross one call at a time
                yield self.call(proxy, member, args, {}, check)
            return
        pending = iter(calls)
        while batch := list(itertools.islice(pending, CALLS_PER_EXCHANGE)):
            yield from self._exchange_each(proxy, member, batch, check)

    def _exchange_each(
        self, proxy: Proxy, member: str, batch: list[tuple[Any, ...]], check: Check | None
    ) -> Iterator[Any]:
        self._current(proxy)
        data = [self._encode(args) for args in batch]
        raw = self._request("call_each", proxy._handle, member, data, calls=len(data))
        ok = isinstance(raw, tuple) and len(raw) in (2, 3) and raw[0] == "ok"
        replies = raw[1] if ok else None
        if (
            not isinstance(replies, list)
            or not 1 <= len(replies) <= len(batch)
            or any(not _is_ok(reply) for reply in replies[:-1])
            or (len(replies) < len(batch) and _is_ok(replies[-1]))
        ):
            self._decoded(raw)  # the child's own error (an "oom", a "bad"), raised
            raise BadReturnValue("a malformed reply from the child (call_each)")
        self._remember(proxy, raw)
        for reply in replies:
            yield self._decoded(reply, None, check)

    # --- write-back: one memory, as in process, for the worker store's arrays ----------

    def _number_sent(self, array: Any) -> int:
        self._next_array += 1
        self._keep(self._next_array, array)
        return self._next_array

    def _keep(self, number: int, array: Any) -> None:
        self._tracked[number] = (array, array.tobytes())
        while len(self._tracked) > TRACKED_ARRAYS:
            del self._tracked[next(iter(self._tracked))]

    def _writes(self) -> list[tuple[int, Any]]:
        """The tracked arrays the grader wrote into since they crossed, as writes."""
        writes = []
        for number, (array, was) in self._tracked.items():
            now = array.tobytes()
            if now != was:
                writes.append((number, wire.to_wire(array)))
                self._tracked[number] = (array, now)
        return writes

    def get(self, proxy: Proxy, member: str, check: Check | None = None) -> Any:
        self._current(proxy)
        fresh = proxy._fresh
        if fresh is not None and fresh[0] == self._stamp and member in fresh[1]:
            if self._death is not None:
                raise ImplementationDied(self._death)
            # a property's value and a query's answer stand while nothing is sent to
            # the child: only a request makes it run, so only a request changes them
            # (each read is decoded anew: the property never shares an object)
            return self._decoded(fresh[1][member], None, check)
        if member.endswith("()"):  # an observed query not read since the last call: ask
            return self.call(proxy, member[:-2], (), {}, check)
        return self._decoded(self._request("get", proxy._handle, member), None, check)

    def _remember(self, proxy: Proxy, reply: Any) -> None:
        """Keep the properties the child read right after this call, to serve every
        read of them as long as nothing else is sent to the child meanwhile."""
        has_snapshot = isinstance(reply, tuple) and len(reply) == 3 and isinstance(reply[2], dict)
        snapshot = reply[2] if has_snapshot else None
        proxy._fresh = None if snapshot is None else (self._stamp, snapshot)

    def drop(self, proxy: Proxy) -> None:
        if proxy._generation == self.generation:
            self._drops.append(proxy._handle)

    def _current(self, proxy: Proxy) -> None:
        if proxy._generation != self.generation and self._death is None:
            self._death = "this component's child was restarted (it cannot continue)"

    def _encode(self, value: object) -> Any:
        return wire.to_wire(value, handle_of=self._handle_of)

    def _handle_of(self, value: object) -> int | tuple[Any, ...] | None:
        if type(value).__name__ == "Recorded":  # the grader's recording wrapper
            from harness.grading.recording import Recorded, target_of

            if isinstance(value, Recorded):
                value = target_of(value)
        if isinstance(value, Proxy) and value._channel is self:
            return value._handle
        return self._stand_ins.reference_of(value)

    def _serve_callback(self, frame: Any) -> Any:
        """The reply to the child's callback on a stand-in (:mod:`.standins`)."""
        return self._stand_ins.serve(frame, self._child_proxy)

    def _child_proxy(self, handle: int, component: str, extras: tuple[str, ...]) -> Proxy:
        """A proxy of a component of the child's, handed to a stand-in."""
        return proxy_class(component, extras)(self, handle, self.generation)

    def _ask(self, op: str, *payload: Any) -> Any:
        """One request to the child; its decoded result, or the child's error raised."""
        return self._decoded(self._request(op, *payload))

    def _request(self, op: str, *payload: Any, calls: int = 1) -> Any:
        """One request to the child: its raw reply; raises ImplementationDied (always
        from here, with the same message) once the child has died in this property.
        ``calls``: how many calls of the implementation it makes (each has the limit
        of one call)."""
        reply: Any = None
        if self._death is None:
            reply = self._exchange(op, payload, calls)
        if self._death is not None:
            raise ImplementationDied(self._death)
        return reply

    def _decoded(self, reply: Any, on_array: Any = None, check: Check | None = None) -> Any:
        """The value of an ``ok`` reply, decoded and checked on the property's clock,
        or the error the reply reports, raised."""
        kind = reply[0] if isinstance(reply, tuple) and reply else None
        if kind == "ok" and len(reply) in (2, 3):
            started = time.monotonic()
            try:
                value = wire.from_wire(reply[1], on_array=on_array)
            except Exception as e:  # noqa: BLE001 - a value the spec's types refuse
                raise BadReturnValue(f"the result could not be decoded: {e}") from None
            finally:
                self._charge(time.monotonic() - started)
            if check is not None:
                started = time.monotonic()
                try:
                    check(value)
                finally:
                    self._charge(time.monotonic() - started)
            return value
        if kind == "raise" and len(reply) == 5 and _strings(reply[1:4]) and type(reply[4]) is bool:
            raise rebuilt_error(reply[1], reply[2], reply[3], reply[4])
        if kind == "bad" and len(reply) == 2 and type(reply[1]) is str:
            raise BadReturnValue(reply[1])
        raise BadReturnValue(f"a malformed reply from the child ({kind!r})")

    def _exchange(self, op: str, payload: tuple[Any, ...], calls: int = 1) -> Any:
        """Send one request under the limits; on a death, record it and return None."""
        assert self._child is not None
        left = self.limits.property_seconds - self._used
        out_of_time = self._out_of_time()
        if left <= 0:
            self._die(out_of_time)
            return None
        drops, self._drops = self._drops, []
        self._stamp += 1
        self.requests[
            f"{op} {payload[1] if op in ('call', 'get', 'call_each') else ''}".strip()
        ] += 1
        started = time.monotonic()
        self._depth += 1
        try:
            limit = self.limits.call_seconds * calls
            reply = self._child.request(
                (op, drops, *payload), min(limit, left), serve=self._serve_callback
            )
        except ChildGone as e:
            reason = str(e)
            if reason.startswith("timeout") and left < limit:
                reason = out_of_time
            self._death = reason
            return None
        finally:
            self._depth -= 1
            if self._depth == 0:  # a nested exchange's time is inside the outer one's
                self._used += time.monotonic() - started
        if isinstance(reply, tuple) and reply and reply[0] == "oom":
            self._die(f"out of memory (limit {size_text(self.limits.memory_bytes)})")
            return None
        return reply

    def _charge(self, seconds: float) -> None:
        """Count the grader's own work on a reply against the property's time limit."""
        self._used += seconds
        if self._used > self.limits.property_seconds and self._death is None:
            self._die(self._out_of_time())
            raise ImplementationDied(self._out_of_time())

    def _out_of_time(self) -> str:
        return f"timeout: the property's time limit of {self.limits.property_seconds:g} s ran out"

    def _die(self, reason: str) -> None:
        if self._child is not None:
            self._child.kill(reason)
        self._death = reason


def _is_ok(reply: object) -> bool:
    return isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok"


def _strings(values: object) -> bool:
    return isinstance(values, list | tuple) and all(type(v) is str for v in values)


def _info_problem(info: object) -> str | None:
    """What is wrong with the child's description of the adapter, or None."""
    if not isinstance(info, dict):
        return "sent no description of the adapter"
    names = {name for name, _protocol in COMPONENTS}
    checks = {
        "name": type(info.get("name")) is str and bool(str(info.get("name")).strip()),
        "module_name": type(info.get("module_name")) is str,
        "origin": type(info.get("origin")) is str,
        "provided": _strings(info.get("provided"))
        and set(info.get("provided", ())) <= names,
        "not_attempted": _strings(info.get("not_attempted")),
    }
    bad = [key for key, ok in checks.items() if not ok]
    return f"described the adapter wrongly ({', '.join(bad)})" if bad else None
