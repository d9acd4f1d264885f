"""Every API difference between vLLM releases that the adapter translates, in one table.

The adapter wraps vLLM's own code; where that code's *interface* changed between
releases (not its behaviour — behaviour is what the properties judge), the change is a
row of :data:`API_CHANGES`: what releases before it do, what releases since do, the
newest release verified to have the old form and the oldest verified to have the new
one (read from the 0.11.0, 0.22.1 and 0.33.0 wheels), and a *probe* that tells the
forms apart in the loaded code.

:func:`resolve_api` decides each row from the version number when it lies outside the
unverified gap between ``last_old`` and ``first_new``, and from the probe otherwise (a
release in between, a ``dev`` git checkout, a release candidate). Where the version
decided, the probe must agree: a tree whose code contradicts its version number (a
change under review that alters one of these interfaces) stops the run with
:class:`VllmApiError` naming the row, rather than being mistranslated.

Rows, oldest change first:

=====================  ==============================  ===================================
key                    old form                        new form
=====================  ==============================  ===================================
encoder_units          cache counts encoder *tokens*   counts *embeddings* (``is_embed``)
                       (``get_num_encoder_tokens``,    (``get_num_encoder_embeds``,
                       ``num_tokens_to_schedule``)     ``num_embeds_to_schedule``)
hook_shift             hook has no drafter shift       ``shift_computed_tokens=0``
hook_external_loads    3-tuple result                  + ``external_load_encoder_input``
hash_fn_module         ``vllm.utils``                  ``vllm.utils.hashing``
mm_extra_key_offset    block key is ``mm_hash``        ``(mm_hash, offset - start)``
hook_duplicates        duplicates skipped silently     + ``duplicate_encoder_inputs``
hook_mismatch_guard    —                               reads ``encoder_cache_mismatch_reqs``
hasher_algorithm_arg   algorithm from the environment  ``hash_kwargs(algorithm, /, **kw)``
mm_extra_key_tag       ``(mm_hash, offset)``           ``("mm", mm_hash, offset)``
runner_free_method     the runner frees inline in      ``_process_encoder_cache_``
                       ``_update_states``              ``scheduler_output``
runner_v2_encode_      V2 encodes and stores inside    ``ModelState.execute_mm_encoder``
method                 ``get_mm_embeddings``           encodes and stores
=====================  ==============================  ===================================
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .source import VllmSource

Release = tuple[int, int, int]


class VllmApiError(RuntimeError):
    """The loaded vLLM's interface is not the one the table expects (see the row)."""


@dataclass(frozen=True)
class VllmCode:
    """The vLLM modules the adapter wraps, by role (``None``: it did not import, with
    the reason in :attr:`errors`)."""

    modules: Mapping[str, ModuleType | None]
    errors: Mapping[str, str]

    def module(self, role: str) -> ModuleType:
        module = self.modules.get(role)
        if module is None:
            raise VllmApiError(f"vLLM module for {role} unavailable: {self.errors.get(role)}")
        return module

    def has(self, *roles: str) -> bool:
        return all(self.modules.get(role) is not None for role in roles)


@dataclass(frozen=True)
class ApiChange:
    """One row of the table."""

    key: str
    old: str
    new: str
    last_old: Release | None  # None: no release before the change is supported
    first_new: Release
    #: True when the loaded code has the new form.
    probe: Callable[[VllmCode], bool]


def _attr_exists(role: str, path: str) -> Callable[[VllmCode], bool]:
    def probe(code: VllmCode) -> bool:
        target: object = code.module(role)
        for name in path.split("."):
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True

    return probe


def _hook_parameter(name: str) -> Callable[[VllmCode], bool]:
    def probe(code: VllmCode) -> bool:
        hook = code.module("scheduler").Scheduler._try_schedule_encoder_inputs
        return name in inspect.signature(hook).parameters

    return probe


def hook_result_arity(code: VllmCode) -> int:
    """How many fields ``_try_schedule_encoder_inputs`` returns, from its annotation."""
    hook = code.module("scheduler").Scheduler._try_schedule_encoder_inputs
    annotation = inspect.signature(hook).return_annotation
    if isinstance(annotation, str):  # a module with `from __future__ import annotations`
        node = ast.parse(annotation, mode="eval").body
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
            return len(node.slice.elts)
    elif typing.get_origin(annotation) is tuple and typing.get_args(annotation):
        return len(typing.get_args(annotation))
    raise VllmApiError(f"_try_schedule_encoder_inputs returns {annotation!r}, not a tuple")


def _hook_returns_at_least(count: int) -> Callable[[VllmCode], bool]:
    return lambda code: hook_result_arity(code) >= count


def _hasher_takes_algorithm(code: VllmCode) -> bool:
    hasher = code.module("hasher").MultiModalHasher.hash_kwargs
    params = list(inspect.signature(hasher).parameters.values())
    return bool(params) and params[0].kind is inspect.Parameter.POSITIONAL_ONLY


def _hashing_module_exists(code: VllmCode) -> bool:
    return code.has("hashing")


def _extra_key_probe(form: str) -> Callable[[VllmCode], bool]:
    """Ask vLLM's own ``_gen_mm_extra_hash_keys`` for the key of a one-item request and
    look at its shape: ``bare`` (a str), ``pair`` (a 2-tuple) or ``tagged`` (3-tuple)."""

    def probe(code: VllmCode) -> bool:
        from .requests_bridge import probe_extra_key  # noqa: PLC0415 - needs the request bridge

        key = probe_extra_key(code)
        if form == "offset":
            return isinstance(key, tuple)
        return isinstance(key, tuple) and len(key) == 3 and key[0] == "mm"

    return probe


API_CHANGES: tuple[ApiChange, ...] = (
    ApiChange(
        key="encoder_units",
        old="the encoder cache counts encoder tokens (Request.get_num_encoder_tokens, "
        "can_allocate(..., num_tokens_to_schedule)); is_embed does not reduce the cost",
        new="it counts embeddings (Request.get_num_encoder_embeds, "
        "can_allocate(..., num_embeds_to_schedule))",
        last_old=(0, 11, 0),
        first_new=(0, 22, 1),
        probe=_attr_exists("request", "Request.get_num_encoder_embeds"),
    ),
    ApiChange(
        key="hook_shift",
        old="_try_schedule_encoder_inputs(request, computed, new, budget): no drafter shift",
        new="_try_schedule_encoder_inputs(..., shift_computed_tokens=0)",
        last_old=(0, 11, 0),
        first_new=(0, 22, 1),
        probe=_hook_parameter("shift_computed_tokens"),
    ),
    ApiChange(
        key="hook_external_loads",
        old="the hook returns (to_schedule, num_new_tokens, budget)",
        new="it also returns external_load_encoder_input (encoder-cache connector loads)",
        last_old=(0, 11, 0),
        first_new=(0, 22, 1),
        probe=_hook_returns_at_least(4),
    ),
    ApiChange(
        key="hash_fn_module",
        old="get_hash_fn_by_name lives in vllm.utils",
        new="it lives in vllm.utils.hashing",
        last_old=(0, 11, 0),
        first_new=(0, 22, 1),
        probe=_hashing_module_exists,
    ),
    ApiChange(
        key="mm_extra_key_offset",
        old="a block's multimodal extra key is the item's mm_hash alone",
        new="it is (mm_hash, offset - start_token_idx)",
        last_old=(0, 11, 0),
        first_new=(0, 22, 1),
        probe=_extra_key_probe("offset"),
    ),
    ApiChange(
        key="hook_duplicates",
        old="an item whose hash is already scheduled this step is skipped, unreported",
        new="it is returned in duplicate_encoder_inputs (a fifth field) for the caller to "
        "reference with check_and_update_cache",
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_hook_returns_at_least(5),
    ),
    ApiChange(
        key="hook_mismatch_guard",
        old="the hook reads no count-mismatch state",
        new="it checks held counts (get_cached_num_encoder_embeds) and records rejected "
        "requests in Scheduler.encoder_cache_mismatch_reqs",
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_attr_exists("scheduler", "Scheduler._reject_on_encoder_cache_embed_mismatch"),
    ),
    ApiChange(
        key="hasher_algorithm_arg",
        old="MultiModalHasher.hash_kwargs(**kwargs) reads VLLM_MM_HASHER_ALGORITHM",
        new="hash_kwargs(algorithm, /, **kwargs) takes it from MultiModalConfig",
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_hasher_takes_algorithm,
    ),
    ApiChange(
        key="mm_extra_key_tag",
        old="the key is (mm_hash, offset - start_token_idx)",
        new='it is ("mm", mm_hash, offset - start_token_idx)',
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_extra_key_probe("tagged"),
    ),
    ApiChange(
        key="runner_free_method",
        old="GPUModelRunner._update_states pops free_encoder_mm_hashes inline",
        new="GPUModelRunner._process_encoder_cache_scheduler_output pops them",
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_attr_exists(
            "gpu_model_runner", "GPUModelRunner._process_encoder_cache_scheduler_output"
        ),
    ),
    ApiChange(
        key="runner_v2_encode_method",
        old="model runner V2's DefaultModelState.get_mm_embeddings encodes, stores and "
        "gathers in one",
        new="ModelState.execute_mm_encoder encodes and stores (the gather apart)",
        last_old=(0, 22, 1),
        first_new=(0, 33, 0),
        probe=_attr_exists("v2_model_state", "ModelState.execute_mm_encoder"),
    ),
)

#: Which rows each component's translation reads (a row whose probe cannot run because
#: its module failed to import only matters to the components that use it).
ROWS_BY_COMPONENT: dict[str, tuple[str, ...]] = {
    "encoder_cache_manager": ("encoder_units",),
    "encoder_decoder_cache_manager": ("encoder_units",),
    "scheduling_hook": (
        "encoder_units",
        "hook_shift",
        "hook_external_loads",
        "hook_duplicates",
        "hook_mismatch_guard",
    ),
    "hasher": ("hasher_algorithm_arg",),
    "block_hasher": ("hash_fn_module", "mm_extra_key_offset", "mm_extra_key_tag"),
    "splice": (),
    "item_cache": (),
    "worker_store": ("runner_free_method",),  # V2's: adapters/vllm/__init__.py
    "engine_loop": ("hash_fn_module",),
}

#: The hasher algorithm vLLM uses by default (VLLM_MM_HASHER_ALGORITHM before 0.33,
#: MultiModalConfig.mm_hasher_algorithm since).
DEFAULT_MM_HASHER_ALGORITHM = "blake3"

#: The prefix-caching hash vLLM uses by default (CacheConfig.prefix_caching_hash_algo).
DEFAULT_PREFIX_CACHING_HASH_ALGO = "sha256"


@dataclass(frozen=True)
class Api:
    """The resolved forms: row key -> True when the loaded vLLM has the new form."""

    source: VllmSource
    new_form: Mapping[str, bool]
    #: Row key -> "version" or "probe": what decided it.
    decided_by: Mapping[str, str]

    def has(self, key: str) -> bool:
        if key not in self.new_form:
            raise VllmApiError(f"API row {key!r} was not resolved for {self.source.describe()}")
        return self.new_form[key]


def resolve_api(source: VllmSource, code: VllmCode, keys: tuple[str, ...]) -> Api:
    """Resolve the rows ``keys`` for the loaded code (see the module docstring)."""
    new_form: dict[str, bool] = {}
    decided_by: dict[str, str] = {}
    rows = {row.key: row for row in API_CHANGES}
    for key in keys:
        row = rows[key]
        probed = row.probe(code)
        by_version = _by_version(row, source.release)
        if by_version is not None and by_version != probed:
            raise VllmApiError(
                f"{source.describe()}: API row {key!r} says version {source.version} has the "
                f"{'new' if by_version else 'old'} form ({row.new if by_version else row.old}), "
                f"but the code has the {'new' if probed else 'old'} form; the tree differs "
                "from its release here — update adapters/vllm/versions.py"
            )
        new_form[key] = probed
        decided_by[key] = "version" if by_version is not None else "probe"
    return Api(source=source, new_form=new_form, decided_by=decided_by)


def _by_version(row: ApiChange, release: Release | None) -> bool | None:
    """The form the table records for ``release``; ``None`` in the unverified gap."""
    if release is None:
        return None
    if release >= row.first_new:
        return True
    if row.last_old is not None and release <= row.last_old:
        return False
    return None


def attributes_read(cls: type, method: str) -> frozenset[str]:
    """The instance attributes ``cls.method`` reads on ``self``, following the calls it
    makes to other methods of the class: what a ``cls.__new__(cls)`` shell must carry."""
    seen: set[str] = set()
    attributes: set[str] = set()
    pending = [method]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        function = inspect.getattr_static(cls, name, None)
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        if not inspect.isfunction(function):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                member = inspect.getattr_static(cls, node.attr, None)
                if inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod)):
                    pending.append(node.attr)
                elif isinstance(member, property):
                    pending.append(node.attr)
                    attributes.update(_property_reads(cls, node.attr))
                else:
                    attributes.add(node.attr)
    return frozenset(attributes)


def _property_reads(cls: type, name: str) -> set[str]:
    prop = inspect.getattr_static(cls, name)
    getter: Any = getattr(prop, "fget", None)
    if getter is None:
        return set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(getter)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
