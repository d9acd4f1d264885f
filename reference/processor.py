"""Placeholder expansion (EXP-1..10): one marker per image becomes that image's
placeholder tokens, and a ``PlaceholderRange`` records where they are."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reference.policies import check_image, image_token_ids, validate_policy
from spec.errors import InvalidInputError, MarkerCountError
from spec.types import ExpandedPrompt, ImageInput, PlaceholderRange, ProcessorConfig


def _check_config(config: object) -> ProcessorConfig:
    if not isinstance(config, ProcessorConfig):
        raise InvalidInputError(f"config must be a ProcessorConfig, got {type(config).__name__}")
    validate_policy(config.policy)
    ids = (config.marker_id, config.placeholder_id, config.break_id, config.end_id)
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InvalidInputError(f"special token ids must be non-negative ints, got {ids}")
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"special token ids must be distinct, got {ids}")
    return config


class Processor:
    """Expands image markers under a token-count policy (``spec.components.Processor``).

    Every position of a range holds ``placeholder_id``, except the break and end
    positions of a row-break range (EXP-2, EXP-10). Text tokens are non-negative ints
    other than the four special ids; the marker is the only special id a prompt may
    carry (EXP-4).
    """

    def __init__(self, config: ProcessorConfig) -> None:
        self._config = _check_config(config)

    def num_image_tokens(self, image: ImageInput) -> int:
        """Range length of ``image`` (EXP-5..10); break and end tokens included."""
        tokens, _ = self._image_tokens(image)
        return len(tokens)

    def expand(self, prompt: Sequence[int], images: Sequence[ImageInput]) -> ExpandedPrompt:
        """Replace the i-th marker by the i-th image's tokens (EXP-1..5)."""
        config = self._config
        text = self._check_prompt(prompt)
        if not isinstance(images, (list, tuple)):
            raise InvalidInputError(
                f"images must be a list or tuple of images, got {type(images).__name__}"
            )
        num_markers = text.count(config.marker_id)
        if num_markers != len(images):
            raise MarkerCountError(
                f"prompt has {num_markers} image markers (id {config.marker_id}) "
                f"but {len(images)} images were given"
            )
        # Validate every image before expanding any, so the error names the first bad one.
        per_image = [self._image_tokens(image, index) for index, image in enumerate(images)]

        token_ids: list[int] = []
        ranges: list[PlaceholderRange] = []
        next_image = 0
        for token in text:
            if token != config.marker_id:
                token_ids.append(token)
                continue
            tokens, is_embed = per_image[next_image]
            next_image += 1
            ranges.append(PlaceholderRange(len(token_ids), len(tokens), is_embed))
            token_ids.extend(tokens)
        return ExpandedPrompt(token_ids=tuple(token_ids), ranges=tuple(ranges))

    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        config = self._config
        try:
            checked = check_image(image)
            return image_token_ids(
                config.policy, checked, config.placeholder_id, config.break_id, config.end_id
            )
        except InvalidInputError as e:
            if index is None:
                raise
            raise InvalidInputError(f"image {index}: {e}") from None

    def _check_prompt(self, prompt: object) -> list[int]:
        if isinstance(prompt, (str, bytes)) or not isinstance(prompt, (list, tuple)):
            raise InvalidInputError(
                f"prompt must be a list or tuple of token ids, got {type(prompt).__name__}"
            )
        reserved = self._config.special_ids() - {self._config.marker_id}
        text: list[int] = []
        for position, token in enumerate(prompt):
            if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
                raise InvalidInputError(
                    f"prompt position {position}: token ids must be ints, "
                    f"got {type(token).__name__}"
                )
            value = int(token)
            if value < 0:
                raise InvalidInputError(f"prompt position {position}: negative token id {value}")
            if value in reserved:
                raise InvalidInputError(
                    f"prompt position {position}: token id {value} is reserved for "
                    "image placeholders and cannot be used as text"
                )
            text.append(value)
        return text
