"""What a long run is doing: a property that runs for more than a few seconds says, on
the channel its caller gives (stderr in ``verify``, ``grade``, the pytest plugin, the
kill matrix), how many examples or machine programs it has run so far.

The runner wraps each run of a property in :func:`beating`; nothing is said unless a
caller has opened a :func:`listening` block, and nothing is said for a run shorter than
:data:`EVERY_SECONDS`. The beat is a daemon thread that only reads the run's counter,
so it changes nothing the property does: the same examples, the same verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from properties.framework import Runnable

#: Seconds between two beats of one run (the first after as many).
EVERY_SECONDS = 5.0

#: Where beats go while a caller listens (forked workers inherit it).
_sink: Callable[[str], None] | None = None


@contextmanager
def listening(sink: Callable[[str], None] | None) -> Iterator[None]:
    """Send the beats of every property run inside this block to ``sink`` (one line
    each); ``None`` keeps runs silent."""
    global _sink
    previous, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = previous


def beat_line(name: str, runnable: Runnable, seconds: float, set_aside: tuple[str, ...]) -> str:
    unit = "programs" if runnable.machine_name is not None else "examples"
    aside = f", with {', '.join(set_aside)} set aside" if set_aside else ""
    return f"{name}: {runnable.examples} {unit} so far ({seconds:.0f} s{aside})"


@contextmanager
def beating(name: str, runnable: Runnable, set_aside: tuple[str, ...] = ()) -> Iterator[None]:
    """While the block runs ``runnable``, a beat every :data:`EVERY_SECONDS`."""
    sink = _sink
    if sink is None:
        yield
        return
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(EVERY_SECONDS):
            sink(beat_line(name, runnable, time.monotonic() - started, set_aside))

    thread = threading.Thread(target=beat, name=f"heartbeat {name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
