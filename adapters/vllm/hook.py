"""vLLM's ``Scheduler._try_schedule_encoder_inputs`` and ``compute_mm_encoder_budget``
behind ``spec.components.SchedulingHook``.

The hook is a method of vLLM's ``Scheduler``, which a test cannot construct without a
model. It is called on ``Scheduler.__new__(Scheduler)`` carrying exactly the attributes
the method reads — found by reading the method's source (and of the methods it calls
on ``self``), so that a vLLM that starts reading a new attribute stops the run with a
message naming it instead of an ``AttributeError`` mid-property:

- ``encoder_cache_manager``: vLLM's ``EncoderCacheManager`` inside the
  :class:`~adapters.vllm.cache.VllmEncoderCacheManager` the property passes;
- ``scheduler_config``: an object with ``disable_chunked_mm_input`` (vLLM's
  ``SchedulerConfig`` validates fields the method never reads);
- ``is_encoder_decoder = False`` (a decoder-only VLM), ``ec_connector = None`` (no
  remote encoder cache);
- since 0.33, ``encoder_cache_mismatch_reqs``: an empty set per call.

A count mismatch (SCH-11) is vLLM's rejection form -- the request recorded in
``encoder_cache_mismatch_reqs`` (the scheduler fails it at the step's end) and
``([], 0, budget, [], [])`` returned (the budget is whatever the walk left: the callers
drop it with a zero-token step) -- and is reported as the spec's
``EmbedCountMismatchError``. Only that whole form is: a call that records the request
but returns anything else is returned as it is, for SCH-11 to judge.

The result tuple is read according to :mod:`adapters.vllm.versions` (rows
``hook_external_loads`` and ``hook_duplicates``). A ``ValueError`` from vLLM's
``compute_mm_encoder_budget`` — its one raise, the item that can never fit — is
reported as the spec's ``BudgetConfigError`` with vLLM's message.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from spec.components import EncoderCacheManager
from spec.errors import BudgetConfigError, EmbedCountMismatchError
from spec.types import EncoderBudgetConfig, RequestView, ScheduleDecision, SchedulerConfig

from .cache import VllmEncoderCacheManager
from .versions import Api, VllmApiError, VllmCode, attributes_read

_HOOK = "_try_schedule_encoder_inputs"


class VllmSchedulingHook:
    """``spec.components.SchedulingHook`` running vLLM's scheduler code."""

    def __init__(self, code: VllmCode, api: Api, config: SchedulerConfig) -> None:
        self._scheduler = code.module("scheduler").Scheduler
        # The count-mismatch guard logs a warning per rejection, which SCH-11 provokes
        # on purpose; vLLM's own logging setup is not applied to a bare Scheduler, so
        # the level the adapter's loader chose (VLLM_LOGGING_LEVEL) is applied here.
        logging.getLogger(self._scheduler.__module__).setLevel(
            os.environ.get("VLLM_LOGGING_LEVEL", "CRITICAL")
        )
        self._compute_budget = code.module("encoder_cache_manager").compute_mm_encoder_budget
        self._api = api
        self._config = SimpleNamespace(
            disable_chunked_mm_input=bool(config.disable_chunked_mm_input)
        )
        _check_shell_attributes(self._scheduler, self._shell_attributes(None).keys())

    def _shell_attributes(self, cache: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "encoder_cache_manager": cache,
            "scheduler_config": self._config,
            "is_encoder_decoder": False,
            "ec_connector": None,
        }
        if self._api.has("hook_mismatch_guard"):
            attributes["encoder_cache_mismatch_reqs"] = set()
        return attributes

    def try_schedule_encoder_inputs(
        self,
        request: RequestView,
        num_computed_tokens: int,
        num_new_tokens: int,
        encoder_compute_budget: int,
        cache: EncoderCacheManager,
        shift_computed_tokens: int = 0,
    ) -> ScheduleDecision:
        if not isinstance(cache, VllmEncoderCacheManager):
            raise TypeError(
                "vLLM's scheduling hook drives vLLM's EncoderCacheManager; got a "
                f"{type(cache).__module__}.{type(cache).__qualname__}"
            )
        shell = self._scheduler.__new__(self._scheduler)
        for name, value in self._shell_attributes(cache.vllm).items():
            setattr(shell, name, value)
        vllm_request = cache.vllm_request(request)
        args: list[Any] = [
            vllm_request,
            num_computed_tokens,
            num_new_tokens,
            encoder_compute_budget,
        ]
        if self._api.has("hook_shift"):
            args.append(shift_computed_tokens)
        elif shift_computed_tokens:
            raise VllmApiError(
                f"{self._api.source.describe()} has no drafter shift (row hook_shift); "
                f"cannot schedule with shift_computed_tokens={shift_computed_tokens}"
            )
        result = getattr(shell, _HOOK)(*args)
        arity = 3 + self._api.has("hook_external_loads") + self._api.has("hook_duplicates")
        if not isinstance(result, tuple) or len(result) != arity:
            raise VllmApiError(
                f"{_HOOK} returned {result!r}; the table (rows hook_external_loads, "
                f"hook_duplicates) expects a {arity}-tuple"
            )
        to_schedule, new_tokens, budget = result[0], result[1], result[2]
        if self._api.has("hook_external_loads") and result[3]:
            raise VllmApiError(f"{_HOOK} reported connector loads {result[3]} without a connector")
        duplicates = result[4] if self._api.has("hook_duplicates") else ()
        recorded: set[str] = getattr(shell, "encoder_cache_mismatch_reqs", set())
        if vllm_request.request_id in recorded and (
            (list(to_schedule), new_tokens, list(duplicates)) == ([], 0, [])
        ):
            raise EmbedCountMismatchError(
                f"vLLM rejected request {request.request_id}'s step "
                "(Scheduler.encoder_cache_mismatch_reqs): an item's identifier is scheduled "
                "earlier in the step or held with another number of embeddings"
            )
        return ScheduleDecision(
            encoder_inputs_to_schedule=tuple(int(i) for i in to_schedule),
            num_new_tokens=int(new_tokens),
            encoder_compute_budget=int(budget),
            duplicate_encoder_inputs=tuple(int(i) for i in duplicates),
        )

    def compute_mm_encoder_budget(
        self, config: EncoderBudgetConfig, max_tokens_per_item: Mapping[str, int]
    ) -> tuple[int, int]:
        scheduler_config = SimpleNamespace(
            max_num_encoder_input_tokens=config.max_num_encoder_input_tokens,
            encoder_cache_size=config.encoder_cache_size,
            max_num_batched_tokens=config.max_num_batched_tokens,
            disable_chunked_mm_input=config.disable_chunked_mm_input,
        )
        try:
            budget, cache_size = self._compute_budget(scheduler_config, dict(max_tokens_per_item))
        except ValueError as e:
            raise BudgetConfigError(str(e)) from e
        return int(budget), int(cache_size)


@functools.cache
def _attributes_needed(scheduler: type) -> frozenset[str]:
    return attributes_read(scheduler, _HOOK)


def _check_shell_attributes(scheduler: type, provided: Any) -> None:
    missing = sorted(_attributes_needed(scheduler) - set(provided))
    if missing:
        raise VllmApiError(
            f"Scheduler.{_HOOK} (or a method it calls) reads self.{', self.'.join(missing)}, "
            "which the adapter's Scheduler shell does not carry: add it to "
            "adapters/vllm/hook.py and the table in adapters/vllm/versions.py"
        )
