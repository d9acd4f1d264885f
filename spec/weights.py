"""Model weights versions (SYS-12): what an engine's vision tower computes after a
weight update.

The engine loop's encoder is the toy encoder (ENC); the engine owns the model's
weights. At weights version ``v`` (0 when the engine is built, one more after each
``update_weights()``), an item's embedding rows are the encoder's rows plus ``v`` in
every element, in the rows' own dtype. Any change would do; this one keeps version 0
exactly the encoder's output, so an engine that never updates its weights computes what
it always did, and a row served from before an update differs from the current one in
every element.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def rows_at_weights_version(rows: NDArray[Any], version: int) -> NDArray[Any]:
    """The embedding rows at weights ``version`` of an item whose encoder output is
    ``rows`` (``rows`` itself at version 0)."""
    if version == 0:
        return rows
    shifted: NDArray[Any] = rows + np.asarray(version, dtype=rows.dtype)
    return shifted.astype(rows.dtype, copy=False)
