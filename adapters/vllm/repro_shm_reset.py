"""Finding V31 through vLLM's shared-memory processor cache (docs/findings.md):
``mm_processor_cache_type="shm"``. The API process's ``ShmObjectStoreSenderCache`` writes
each new item into a ring in ``/dev/shm`` and sends the request a handle (address,
monotonic id); the worker's ``ShmObjectStoreReceiverCache`` reads it when the request is
first scheduled (``WorkerWrapperBase._apply_mm_cache``). A cache clear in between —
``AsyncLLM.pause_generation(mode="keep", clear_cache=True)`` clears the sender first,
in every mode; ``reset_mm_cache`` and ``sleep`` do too — recycles the ring while the
request waits, and the next request's item is written where the waiting request's was.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_shm_reset.py

The pair is vLLM's two classes (``adapters/vllm/item_cache_shm.py`` builds them: a
``VllmConfig`` stand-in with one worker, the worker lock, a segment of its own, a ring of
a few hundred bytes). ``r1`` carries image ``B`` and waits in the engine's queue; the
caches are cleared (sender, then receiver, as a pause with ``clear_cache`` does); ``r2``
carries image ``A`` and is scheduled; then ``r1`` is scheduled and the worker reads its
handle. 0.22.1 restarts the ring's ids at the clear, so ``r1``'s handle names ``A``'s
object: ``r1`` is served image ``A``. 0.33.0 keeps the ids increasing, so the read
raises ``ValueError`` — in ``execute_model``, which stops the engine core.

Prints each step, then one JSON object last; exit status 0 (the finding is the output,
not the status).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

os.environ["MMSPEC_VLLM_PROCESSOR_CACHE"] = "shm"

from adapters.vllm import ADAPTER  # noqa: E402 - after the path set-up above

IMAGE_A, IMAGE_B = b"aaaa", b"bbbb"


def main() -> None:
    assert ADAPTER.item_cache is not None
    pair = ADAPTER.item_cache(4)
    log: list[str] = []
    sent = pair.send([("B", IMAGE_B)])
    log.append(f"r1 (image B) sent: {'with its data' if sent[0] is not None else 'omitted'}; "
               "it waits in the engine's queue")
    pair.clear()
    log.append("the caches are cleared (the sender's ring, then the worker's receiver)")
    pair.send([("A", IMAGE_A)])
    served_a = pair.receive([("A", IMAGE_A)])[0]
    log.append(f"r2 (image A) sent and scheduled: the worker reads {served_a!r}")
    error, served = "", b""
    try:
        served = pair.receive([("B", IMAGE_B)])[0]
        log.append(f"r1 scheduled: the worker reads {served!r} for image B")
    except Exception as e:  # noqa: BLE001 - the outcome is the finding
        error = f"{type(e).__name__}: {e}"
        log.append(f"r1 scheduled: the worker's read raises {error}")
    for line in log:
        print(line)
    print(json.dumps({
        "served": served.decode() if served else None,
        "wrong_image": bool(served) and served != IMAGE_B,
        "error": error,
    }))


if __name__ == "__main__":
    main()
