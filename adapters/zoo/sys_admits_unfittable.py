"""Admits requests whose images can never fit the encoder budget or cache, or whose
prompt can never fit the KV cache: they starve instead of being rejected (SYS-9)."""

from __future__ import annotations

from reference.engine import EngineLoop
from spec.adapter import Adapter
from spec.types import EngineRequest

BREAKS = "SYS-9"
KILLED_BY = "EngineMachine"
ORIGIN = (
    "typical student error: no admission control: a request is queued without checking that "
    "its images fit the encoder budget and cache and its prompt the KV cache, so it starves"
)


class AdmitsUnfittable(EngineLoop):
    def _admission_check(self, request: EngineRequest) -> None:
        pass  # BUG: no admission control


ADAPTER = Adapter(name="zoo.sys_admits_unfittable", engine_loop=AdmitsUnfittable)
