"""``mmspec.machines``: the state machines for third parties' own test suites
(:mod:`mmspec.harness.machines`), e.g.
``TestMyCache = mmspec.machines.encoder_cache(MyCache, reset=True).TestCase``.
Installed from the wheel only; in a checkout, import ``harness.machines``."""

from mmspec.harness.machines import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    embedding_cache,
    encoder_cache,  # (the wheel has mmspec.harness; a checkout has harness/ instead)
    engine,
    engine_async,
    engine_async_drafter,
    engine_drafter,
    engine_hybrid,
    engine_resets,
    item_cache,
    mmspec_settings,
)

__all__ = [
    "embedding_cache",
    "encoder_cache",
    "engine",
    "engine_async",
    "engine_async_drafter",
    "engine_drafter",
    "engine_hybrid",
    "engine_resets",
    "item_cache",
    "mmspec_settings",
]
