"""Dynamic resolution counts patches, not merged patches: merge_size² times too many
tokens (EXP-8)."""

from __future__ import annotations

from reference.policies import check_image, image_height_width, smart_resize
from reference.processor import Processor
from spec.adapter import Adapter
from spec.types import DynamicResolutionPolicy

BREAKS = "EXP-8"
KILLED_BY = "exp_dynamic_policy"
ORIGIN = (
    "typical student error: Qwen2-VL token count as (h/patch)*(w/patch), forgetting the "
    "merge_size**2 spatial merge"
)


class ForgetsMerge(Processor):
    def _image_tokens(
        self, image: object, index: int | None = None
    ) -> tuple[tuple[int, ...], tuple[bool, ...] | None]:
        policy = self._config.policy
        if not isinstance(policy, DynamicResolutionPolicy):
            return super()._image_tokens(image, index)
        h, w = image_height_width(check_image(image), policy.name)
        patch = policy.patch_size
        h2, w2 = smart_resize(h, w, patch * policy.merge_size, policy.min_pixels,
                              policy.max_pixels)
        return (self._config.placeholder_id,) * ((h2 // patch) * (w2 // patch)), None  # BUG


ADAPTER = Adapter(name="zoo.exp_dynamic_forgets_merge", processor=ForgetsMerge)
