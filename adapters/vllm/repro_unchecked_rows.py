"""Finding V25 through vLLM's own model-runner code (docs/findings.md): an encoder output
whose row count differs from its placeholder's embeddings is stored and gathered without
a check.

    MMSPEC_VLLM_SRC=.vllm-cache/vllm-0.33.0 PYTHONPATH=. .venv-vllm/bin/python \\
        adapters/vllm/repro_unchecked_rows.py

One image of 4 placeholder positions (all embeddings) is encoded by a model whose
``embed_multimodal`` returns 6 rows (too many), then 3 (too few). Each output goes
through ``GPUModelRunner._execute_mm_encoder`` (``sanity_check_mm_encoder_outputs``, the
``encoder_cache``), and the prefill chunk ``[0, 4)`` through ``_gather_mm_embeddings``;
the short one's rows then go to the splice, ``_merge_multimodal_embeddings``. All of it is
vLLM's code on a runner built without ``__init__`` (``adapters/vllm/runner.py``:
``bare_runner``; the model is the passthrough stand-in).

Prints what each step served and one JSON object last (the test reads it); exit status 1
when the gather took a mis-sized output without an error (the finding stands), 0 if not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402 - after the path set-up above

from adapters.vllm import CODE  # noqa: E402
from adapters.vllm.runner import bare_runner  # noqa: E402

PLACEHOLDERS = 4
HIDDEN = 2


def encode_and_gather(rows: int) -> dict[str, Any]:
    inputs = CODE.module("inputs")
    runner = bare_runner(CODE)
    output = torch.arange(rows * HIDDEN, dtype=torch.float32).reshape(rows, HIDDEN)
    element = inputs.MultiModalFieldElem(data=output, field=inputs.MultiModalBatchedField())
    feature = inputs.MultiModalFeatureSpec(
        data=inputs.MultiModalKwargsItem({"mmspec_rows": element}),
        modality="image",
        identifier="img",
        mm_position=inputs.PlaceholderRange(offset=0, length=PLACEHOLDERS),
    )
    runner.requests = {"r": SimpleNamespace(num_computed_tokens=0, mm_features=[feature])}
    runner.input_batch = SimpleNamespace(req_ids=["r"])
    runner._execute_mm_encoder(
        SimpleNamespace(
            scheduled_encoder_inputs={"r": [0]},
            free_encoder_mm_hashes=[],
            ec_manager_metadata=None,
        )
    )
    held = int(runner.encoder_cache["img"].shape[0])
    try:
        embeds, is_mm_embed = runner._gather_mm_embeddings(
            SimpleNamespace(
                total_num_scheduled_tokens=PLACEHOLDERS,
                num_scheduled_tokens={"r": PLACEHOLDERS},
            )
        )
    except (AssertionError, RuntimeError, ValueError) as error:
        return {"rows_held": held, "gather_error": str(error)}
    served = sum(int(e.shape[0]) for e in embeds)
    splice_error = None
    try:
        merge = CODE.module("models_utils")._merge_multimodal_embeddings
        merge(torch.zeros(PLACEHOLDERS, HIDDEN), embeds, is_mm_embed)
    except ValueError as error:
        splice_error = str(error)
    return {
        "rows_held": held,
        "gather_error": None,
        "rows_served": served,
        "placeholders": int(is_mm_embed.sum()),
        "splice_error": splice_error,
    }


def main() -> int:
    results = {
        "long": encode_and_gather(PLACEHOLDERS + 2),
        "short": encode_and_gather(PLACEHOLDERS - 1),
    }
    for name, result in results.items():
        print(
            f"{name}: the runner holds {result['rows_held']} rows for {PLACEHOLDERS} "
            f"placeholders; gather error: {result['gather_error']}; served "
            f"{result.get('rows_served')}; splice error: {result.get('splice_error')}"
        )
    print(json.dumps(results))
    unchecked = all(r["gather_error"] is None for r in results.values())
    return 1 if unchecked else 0


if __name__ == "__main__":
    raise SystemExit(main())
