"""mmspec's Hypothesis settings profiles (README.md, docs/grading.md).

They are mmspec's own: plain ``hypothesis.settings`` objects by name
(:func:`settings_for`), never registered or loaded as global Hypothesis profiles, so
importing mmspec (its pytest plugin loads with every pytest run of an environment that
has it) changes no profile of the caller's, and no profile the caller registers or loads
changes mmspec's runs.

- ``ci``: derandomized, no example database, fast — the whole suite well within a
  minute on two cores. Same adapter, same verdicts, every time.
- ``dev``: random generation and an example database of this adapter's own, so a
  failure found once is replayed first next time.
- ``thorough``: large example and step counts, database like ``dev``.
- ``mutation``: derandomized, no database and no shrinking: a mutant only needs to be
  killed, not explained, and shrinking is most of the time spent on a kill.
- ``grading``: derandomized, no database, fixed counts: every submission gets exactly
  the same test cases.
- ``crosshair``: CrossHair's symbolic search in place of Hypothesis' random generation
  (the ``hypothesis-crosshair`` backend, installed only in ``.venv-crosshair``:
  ``make crosshair-properties``; docs/crosshair.md says which properties it suits).

Databases are keyed by adapter identity (name + hash of its module file): each
implementation writes only its own directory under ``.hypothesis/examples/`` and reads
the others' read-only, so checking the reference replays what was found against a
student's build without ever deleting it.

Shared between machines (docs/fuzz.md): with ``MMSPEC_REDIS_URL`` set, the ``dev`` and
``thorough`` profiles also read a Redis-backed example database — the one the fuzzers
of ``fuzz/`` write to, each adapter under its own key prefix — and read it read-only:
a verification run replays what any fuzz worker found but never deletes it (Hypothesis
deletes stored examples that no longer fail; here they stay for the next run).
Without the variable nothing changes.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)
from hypothesis.errors import InvalidArgument

from harness import names

#: Where the ``dev``/``thorough`` example databases live, one directory per adapter
#: (``MMSPEC_EXAMPLES_DIR`` moves them, e.g. to keep a test's runs out of the checkout's):
#: the checkout's ``.hypothesis/``, or, installed, the current folder's (as Hypothesis'
#: own default), never inside the installed package.
EXAMPLES_ROOT = Path(
    os.environ.get("MMSPEC_EXAMPLES_DIR")
    or (Path.cwd() if names.INSTALLED else names.HOME) / ".hypothesis" / "examples"
)

#: The environment variable naming the shared Redis example database
#: (``redis://host:port/db``); unset or empty: directories only.
REDIS_URL_ENV = "MMSPEC_REDIS_URL"
#: Every key of the shared database starts with this, then the adapter identity and a
#: colon, then Hypothesis' own key (a digest of the test).
REDIS_KEY_PREFIX = "mmspec:examples:"

PROFILES: tuple[str, ...] = ("ci", "dev", "thorough", "mutation", "grading", "crosshair")
DEFAULT_PROFILE = "ci"

#: Profiles whose database is the adapter's own directory (see :func:`settings_for`).
_WITH_DATABASE = frozenset({"dev", "thorough"})

# Every field of ``hypothesis.settings``, set: a field left unset is filled from whatever
# profile is loaded when the object is built (``settings(parent=None)``), and that is the
# caller's — an engine team's ``ci``, a ``--hypothesis-profile`` — never ours to inherit.
# Hypothesis' built-in defaults, except where a comment says why.
_BASE: dict[str, Any] = {
    "max_examples": 100,
    "derandomize": False,
    "database": None,  # the adapter's own database, where a profile has one (settings_for)
    "verbosity": Verbosity.normal,
    "phases": tuple(Phase),
    "stateful_step_count": 50,
    "report_multiple_bugs": True,
    # Implementations under test may be slow (a real engine, torch on CPU): wall-clock
    # limits would turn slowness into flaky verdicts, so there is no deadline anywhere.
    "deadline": None,
    "print_blob": True,
    # Machines over cache states legitimately generate long programs; the verdict must
    # not depend on how fast the machine running them is.
    "suppress_health_check": (HealthCheck.too_slow,),
    "backend": "hypothesis",
}

# The explain phase traces coverage (slow) and, since every violation is raised from
# ``properties.framework.check``, mostly points there; deterministic profiles skip it.
_NO_EXPLAIN = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)

#: Each profile's departures from :data:`_BASE`.
_PROFILE_FIELDS: dict[str, dict[str, Any]] = {
    "ci": {
        "phases": _NO_EXPLAIN, "derandomize": True, "max_examples": 100,
        "stateful_step_count": 30,
    },
    "dev": {"max_examples": 100, "stateful_step_count": 30},
    "thorough": {"max_examples": 2000, "stateful_step_count": 100},
    "mutation": {
        "derandomize": True, "max_examples": 100, "stateful_step_count": 30,
        "phases": (Phase.explicit, Phase.generate, Phase.target),
    },
    "grading": {
        "phases": _NO_EXPLAIN, "derandomize": True, "max_examples": 200,
        "stateful_step_count": 40,
    },
    # CrossHair's symbolic search in place of random generation. No shrinking or
    # explain phase: CrossHair's counterexamples are already concrete and small.
    # Hypothesis counts test cases (max_examples), but hypothesis-crosshair bounds each
    # path by CPU time (2.5 s without a deadline): a path cut short is discarded, not failed.
    "crosshair": {
        "backend": "crosshair", "phases": (Phase.explicit, Phase.generate),
        "max_examples": 100, "stateful_step_count": 30,
    },
}


class ProfileUnavailableError(ValueError):
    """The profile needs a package this interpreter lacks (``crosshair``)."""


def profile_settings(profile: str) -> settings:
    """The settings of ``profile``, without an example database: a plain settings object,
    never registered or loaded as a Hypothesis profile, and the same whatever profile the
    caller has loaded."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    try:
        return settings(**{**_BASE, **_PROFILE_FIELDS[profile]})
    except InvalidArgument:  # only the crosshair backend can be missing
        raise ProfileUnavailableError(
            f"profile {profile!r} needs hypothesis-crosshair, installed in .venv-crosshair "
            "only: run `make crosshair-properties` (docs/crosshair.md)"
        ) from None


def settings_for(profile: str, adapter_id: str) -> settings:
    """The settings ``profile`` runs under for the adapter whose identity is
    ``adapter_id`` (:attr:`harness.loader.LoadedAdapter.identity`)."""
    base = profile_settings(profile)
    if profile in _WITH_DATABASE:
        return settings(base, database=example_database(adapter_id))
    return base


def example_database(adapter_id: str) -> ExampleDatabase:
    """This adapter's directory, writable, plus every other adapter's, read-only; with
    a shared database configured (:data:`REDIS_URL_ENV`), every adapter's key space in
    it, read-only, this adapter's first."""
    own = DirectoryBasedExampleDatabase(EXAMPLES_ROOT / adapter_id)
    others: list[ExampleDatabase] = [
        ReadOnlyDatabase(DirectoryBasedExampleDatabase(path))
        for path in sorted(EXAMPLES_ROOT.glob("*"))
        if path.is_dir() and path.name != adapter_id
    ]
    url = redis_url()
    if url is not None:
        shared = [adapter_id, *(i for i in shared_identities(url) if i != adapter_id)]
        others = [ReadOnlyDatabase(shared_database(url, i)) for i in shared] + others
    if not others:
        return own
    return MultiplexedDatabase(own, *others)


class SharedDatabaseError(RuntimeError):
    """The shared example database is configured but cannot be used."""


def redis_url() -> str | None:
    """The shared database's URL from :data:`REDIS_URL_ENV`, or ``None``."""
    return os.environ.get(REDIS_URL_ENV) or None


def shared_database(url: str, adapter_id: str) -> ExampleDatabase:
    """The adapter's key space in the Redis database at ``url``, writable (the fuzzers
    write here; verification wraps it in ``ReadOnlyDatabase``)."""
    from hypothesis.extra.redis import RedisExampleDatabase

    prefix = f"{REDIS_KEY_PREFIX}{adapter_id}:".encode()
    return RedisExampleDatabase(_redis_client(url), key_prefix=prefix)


def shared_identities(url: str) -> list[str]:
    """The adapter identities that have examples in the Redis database at ``url``."""
    found: set[str] = set()
    for key in _redis_client(url).scan_iter(match=f"{REDIS_KEY_PREFIX}*".encode()):
        identity, _, _ = bytes(key)[len(REDIS_KEY_PREFIX) :].partition(b":")
        found.add(identity.decode("utf-8", "replace"))
    return sorted(found)


@functools.cache
def _redis_client(url: str) -> Any:
    """One connection pool per URL, checked once: a shared database that is configured
    but unreachable is an error, never silently a run without it."""
    try:
        import redis
    except ImportError as e:  # pragma: no cover - redis is in requirements.txt
        raise SharedDatabaseError(
            f"{REDIS_URL_ENV} is set but the redis package is missing ({e}); "
            "run `make .venv` (requirements.txt pins it), or installed: "
            "`pip install 'mmspec[redis]'`"
        ) from e
    try:
        client = redis.Redis.from_url(url)
        client.ping()
    except (redis.RedisError, ValueError) as e:
        raise SharedDatabaseError(
            f"cannot use the shared example database {REDIS_URL_ENV}={url}: {e} "
            f"(start a redis-server there, or unset {REDIS_URL_ENV})"
        ) from e
    return client
