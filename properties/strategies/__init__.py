"""Hypothesis strategies shared by the properties and state machines (the
"strategies that aim").

Each strategy aims at the cases where serving engines break rather than at uniform
randomness: images of the same length with different bytes; equal content in different
objects and memory layouts; ``is_embed`` masks that are all-False-but-one or a single
position; markers at position 0, adjacent to each other and at the end of the prompt;
byte sizes on the toy policy's 64-byte boundaries; pixel sizes on the rounding ties of
``smart_resize`` and the aspect-ratio ties of InternVL tiling; requests whose items share
content within and across requests; budgets of 0, exactly an item's size and just below.

Everything here is cheap to generate: large pixel arrays are zero-cost broadcast views
(a policy reads only the shape), real pixel data stays within a few hundred bytes.
Strategy factories are cached (``functools.cache``; their arguments are hashable):
building and validating a strategy again inside every draw costs more than the draw
itself. Factories that take arrays or lists (``relaid_copy``, ``equal_content_copy``,
``request_views``) are not.

One module per family; this package re-exports every public name, so
``from properties.strategies import X`` names the same object as the module that holds
it:

- :mod:`~properties.strategies.image_data`: raw image bytes, pixel arrays, shape-only
  images, relaid copies, ``describe_image``;
- :mod:`~properties.strategies.feature_data`: processed features, pairs that differ
  only in how the same bytes are framed, equal-feature copies;
- :mod:`~properties.strategies.hash_data`: hash inputs, confusable structures, the same
  bytes under another layout, processor options, equal-content copies;
- :mod:`~properties.strategies.mm_requests`: ``is_embed`` masks, placeholder ranges,
  content pools, requests, budgets and positions around items, ``describe_range``;
- :mod:`~properties.strategies.token_policies`: the token-count policies and the image
  sides aimed at their boundaries;
- :mod:`~properties.strategies.prompts`: special ids, processor configs, prompts with
  markers, prompt cases.
"""

from __future__ import annotations

from hypothesis.strategies import SearchStrategy

from properties.strategies.feature_data import (
    FEATURE_DTYPES,
    FeaturePair,
    describe_feature,
    describe_layout,
    different_features,
    equal_feature_copy,
    processed_features,
    same_feature,
)
from properties.strategies.hash_data import (
    OPTION_NAMES,
    ArrayPair,
    StructurePair,
    confusable_structures,
    different_options,
    equal_content_copy,
    hash_inputs,
    hash_leaves,
    option_values,
    processor_options,
    reordered,
    same_bytes_different_layout,
    short_text,
)
from properties.strategies.image_data import (
    PIXEL_DTYPES,
    TOY_BOUNDARY_SIZES,
    array_from_bytes,
    array_shapes,
    byte_sizes,
    describe_image,
    images,
    pixel_arrays,
    raw_images,
    relaid_copy,
    same_length_different_bytes,
    same_shape_different_pixels,
    shaped_image,
    shaped_images,
)
from properties.strategies.mm_requests import (
    MMContent,
    budgets_around,
    content_pools,
    describe_range,
    is_embed_masks,
    mm_contents,
    placeholder_ranges,
    positions_around_items,
    prompt_length_of,
    request_views,
    requests_sharing_content,
)
from properties.strategies.prompts import (
    DEFAULT_SPECIALS,
    PromptCase,
    config_for,
    prompt_cases,
    prompts_with_markers,
    special_id_sets,
    text_tokens,
)
from properties.strategies.token_policies import (
    dynamic_policies,
    dynamic_sides,
    fixed_policies,
    images_for_policy,
    rowbreak_policies,
    rowbreak_sides,
    small_policies,
    tiled_policies,
    tiled_sides,
)

__all__ = [
    "ArrayPair",
    "FEATURE_DTYPES",
    "FeaturePair",
    "describe_feature",
    "describe_layout",
    "different_features",
    "equal_feature_copy",
    "processed_features",
    "same_feature",
    "DEFAULT_SPECIALS",
    "MMContent",
    "OPTION_NAMES",
    "PIXEL_DTYPES",
    "PromptCase",
    "SearchStrategy",
    "StructurePair",
    "TOY_BOUNDARY_SIZES",
    "array_from_bytes",
    "array_shapes",
    "budgets_around",
    "byte_sizes",
    "config_for",
    "confusable_structures",
    "content_pools",
    "describe_image",
    "describe_range",
    "different_options",
    "dynamic_policies",
    "dynamic_sides",
    "equal_content_copy",
    "fixed_policies",
    "hash_inputs",
    "hash_leaves",
    "images",
    "images_for_policy",
    "is_embed_masks",
    "mm_contents",
    "option_values",
    "pixel_arrays",
    "placeholder_ranges",
    "positions_around_items",
    "processor_options",
    "prompt_cases",
    "prompt_length_of",
    "prompts_with_markers",
    "raw_images",
    "relaid_copy",
    "reordered",
    "request_views",
    "requests_sharing_content",
    "rowbreak_policies",
    "rowbreak_sides",
    "same_bytes_different_layout",
    "same_length_different_bytes",
    "same_shape_different_pixels",
    "shaped_image",
    "shaped_images",
    "short_text",
    "small_policies",
    "special_id_sets",
    "text_tokens",
    "tiled_policies",
    "tiled_sides",
]
