"""Error types every implementation raises for bad input.

Each error names the problem in its message. Implementations must raise these (or
subclasses), never an ``IndexError`` from deep inside or a silent truncation: the
properties check the *type* of the error, and graders show its message.
"""

from __future__ import annotations


class SpecError(Exception):
    """Base class of every error the specification defines."""


class InvalidInputError(SpecError, ValueError):
    """An argument is malformed: wrong type, negative size, out-of-bounds index."""


class MarkerCountError(InvalidInputError):
    """The prompt's image-marker count differs from the number of images (EXP-4)."""


class InvalidRangeError(InvalidInputError):
    """A ``PlaceholderRange`` is malformed: negative offset, zero length, a mask of
    the wrong length, or a range that does not fit the prompt."""


class EmbedCountMismatchError(SpecError, ValueError):
    """The same ``mm_hash`` was presented with a different embedding count than the
    cached entry holds (HASH-6). Accepting it would mis-account the cache."""


class SpliceCountError(SpecError, ValueError):
    """The splice got a different number of embedding rows than placeholder
    positions (SPL-3). Its message has the upstream form
    ``Attempted to assign <expr> = <n> multimodal tokens to <m> placeholders``."""


class BudgetConfigError(SpecError, ValueError):
    """The encoder budget cannot be sized: an item can never be scheduled (SCH-9)."""


class AdmissionError(SpecError, ValueError):
    """The engine refuses a request at admission because one of its items can never
    fit the encoder budget, the encoder cache, or the KV cache (SYS-9)."""


class UnknownRequestError(SpecError, KeyError):
    """An operation names a request id the component does not hold."""


class MissingEmbeddingError(SpecError, LookupError):
    """The worker store was asked for embeddings of a hash it does not hold (WRK-5)."""


class ItemCacheMissError(SpecError, LookupError):
    """The engine's item cache was sent no data for an item it does not hold (FIC-2):
    the two halves drifted. Retryable: the request is rejected, the engine lives, and
    the front end forgets the key (``ItemCache.invalidate``) so a resend carries the data."""
