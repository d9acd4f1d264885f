"""Load an adapter and check it against the Protocols before anything runs.

The adapter contract (spec/adapter.py): an adapter is a module (an importable name, a
``.py`` file or a package directory) exposing ``ADAPTER``, a
:class:`spec.adapter.Adapter`. A malformed adapter fails here, at once, with *every*
problem listed — module missing, attribute missing, wrong type, a factory that is not
callable or raises, a component missing a method or property of its Protocol, a method
with the wrong arity — so that a student fixes them in one round instead of meeting them
one traceback at a time mid-run.

:func:`build_parts` then composes the adapter's factories with the reference's for the
components the adapter does not provide, recording who stands behind each.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from harness import names
from properties.framework import Parts, keeps_own_cache
from spec.adapter import COMPONENTS, Adapter
from spec.types import ProcessorConfig, SchedulerConfig

#: The checkout root (installed: the ``mmspec/`` folder): where our own files lie.
CHECKOUT_ROOT = names.HOME

#: The default adapter, and the module the short name stands for (installed, the short
#: name still says ``reference``: it means ``mmspec.reference.adapter``).
REFERENCE_REF = "reference"
_ALIASES = {REFERENCE_REF: names.module("reference.adapter")}

#: Provenance of a component that neither the adapter nor the fallback provides.
NOT_PROVIDED = "not provided"

#: Provenance of a component the adapter lacks where the reference would stand in for
#: it but this copy has none (the student kit): what uses it is graded on the autograder.
NEEDS_REFERENCE = "needs the reference (not in the student kit)"


def fallback_for(fallback_ref: str | None) -> str | None:
    """The fallback to load for ``fallback_ref``: itself, except that the reference's
    short name gives none where this copy lacks the reference (the student kit,
    :data:`harness.names.HAS_REFERENCE`). Then :func:`absent_provenance` says so."""
    if fallback_ref == REFERENCE_REF and not names.HAS_REFERENCE:
        return None
    return fallback_ref


def absent_provenance(fallback_ref: str | None) -> str:
    """What stands behind a component nobody provides, when ``fallback_ref`` was asked
    for: :data:`NEEDS_REFERENCE` where it was the reference and this copy lacks it."""
    if fallback_ref == REFERENCE_REF and not names.HAS_REFERENCE:
        return NEEDS_REFERENCE
    return NOT_PROVIDED

#: A small argument for each factory, so the product can be checked against its
#: Protocol. ``None`` marks components that are checked for callability only (the engine
#: loop needs the other components to be built).
_SAMPLE_ARGS: dict[str, tuple[Any, ...] | None] = {
    "processor": (ProcessorConfig(),),
    "hasher": (),
    "feature_hasher": (),
    "encoder": (4,),
    "encoder_cache_manager": (8,),
    "encoder_decoder_cache_manager": (8,),
    "splice": (),
    "scheduling_hook": (SchedulerConfig(),),
    "block_hasher": (2,),
    "item_cache": (8,),
    "embedding_cache": (64,),
    "worker_store": (),
    "engine_loop": None,
}

_PATH_MODULE_PREFIX = "_mmspec_adapter_"
#: The top-level packages of a checkout, which the wheel carries as ``mmspec.<name>``
#: (setup.py's ROOTS): an adapter importing one by its checkout name fails installed.
_CHECKOUT_PACKAGES = frozenset(
    {"spec", "reference", "properties", "harness", "exhaustive", "contracts", "adapters"}
)
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class AdapterLoadError(Exception):
    """The adapter cannot be used; ``problems`` lists everything that is wrong."""

    def __init__(self, ref: str, problems: list[str]) -> None:
        self.ref = ref
        self.problems = list(problems)
        count = len(self.problems)
        header = f"cannot load adapter {ref!r}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n".join([header, *(f"  - {p}" for p in self.problems)]))


@dataclass(frozen=True)
class LoadedAdapter:
    """An adapter that passed the checks, with where it came from."""

    ref: str
    adapter: Adapter
    module_name: str
    #: The resolved file the adapter was loaded from (the module name when it has none).
    origin: str
    #: ``<name>-<sha256(origin)[:12]>``: keys the example database, so failures found
    #: against one implementation are never overwritten by runs against another.
    identity: str

    @property
    def name(self) -> str:
        return self.adapter.name

    def provides(self, component: str) -> bool:
        return getattr(self.adapter, component) is not None


def load_adapter(ref: str) -> LoadedAdapter:
    """Import ``ref`` and check its ``ADAPTER`` against the contract.

    ``ref`` is a module name (``reference`` means ``reference.adapter``), a ``.py`` file,
    or a package directory. Raises :class:`AdapterLoadError` listing every problem.
    """
    module, problems = _import(ref)
    if module is None:
        raise AdapterLoadError(ref, problems)
    adapter = getattr(module, "ADAPTER", None)
    if adapter is None:
        raise AdapterLoadError(
            ref,
            [f"{_shown_module(ref, module)} has no attribute ADAPTER (a spec.adapter.Adapter)"],
        )
    if not isinstance(adapter, Adapter):
        raise AdapterLoadError(
            ref,
            [
                f"ADAPTER is a {type(adapter).__module__}.{type(adapter).__qualname__}, "
                "not a spec.adapter.Adapter"
            ],
        )
    problems.extend(check_adapter(adapter))
    if problems:
        raise AdapterLoadError(ref, problems)
    origin = str(Path(module.__file__).resolve()) if module.__file__ else module.__name__
    return LoadedAdapter(
        ref=ref,
        adapter=adapter,
        module_name=module.__name__,
        origin=origin,
        identity=adapter_identity(adapter.name, origin),
    )


def _shown_module(ref: str, module: ModuleType) -> str:
    """The module as the user named it (path-loaded modules get internal names)."""
    if module.__name__.startswith(_PATH_MODULE_PREFIX):
        return ref
    return f"module {module.__name__}"


def adapter_identity(name: str, origin: str) -> str:
    """A filesystem-safe key naming one implementation at one place."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "adapter"
    digest = hashlib.sha256(origin.encode("utf-8")).hexdigest()[:12]
    return f"{safe}-{digest}"


def names_a_path(ref: str) -> bool:
    """Whether the adapter reference ``ref`` is loaded as a file or folder (a ``.py``
    file, anything with a slash, anything no module could be named), not imported."""
    name = _ALIASES.get(ref, ref)
    return ref.endswith(".py") or "/" in ref or "\\" in ref or not _MODULE_NAME.match(name)


def _import(ref: str) -> tuple[ModuleType | None, list[str]]:
    """Import the module ``ref`` names; on failure, the problem (with the error)."""
    name = _ALIASES.get(ref, ref)
    if names_a_path(ref):
        return _import_path(ref, Path(ref))
    try:
        return importlib.import_module(name), []
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            return None, [f"module {name} not found (give an importable module name or a path)"]
        return None, [f"importing {name} failed: {_describe(e)}{_checkout_name_hint(e, ref)}"]
    except (Exception, SystemExit) as e:
        return None, [f"importing {name} failed: {_describe(e)}"]


def _import_path(ref: str, path: Path) -> tuple[ModuleType | None, list[str]]:
    """Load a ``.py`` file or a package directory under a name of its own."""
    resolved = path.resolve()
    if resolved.is_dir():
        init = resolved / "__init__.py"
        if not init.is_file():
            return None, [f"{ref} is a directory without __init__.py"]
        file, search = init, [str(resolved)]
    elif resolved.is_file():
        file, search = resolved, None
    else:
        return None, [f"no such file or directory: {ref}"]
    # Adapters import spec/ and reference/ from the checkout, wherever the file lies
    # (installed: ``mmspec`` is importable already, and its folder's parent is the root).
    if str(names.IMPORT_ROOT) not in sys.path:
        sys.path.insert(0, str(names.IMPORT_ROOT))
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:12]
    module_name = f"{_PATH_MODULE_PREFIX}{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name], []
    spec = importlib.util.spec_from_file_location(
        module_name, file, submodule_search_locations=search
    )
    if spec is None or spec.loader is None:
        return None, [f"cannot load {ref} as a Python module"]
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:
        del sys.modules[module_name]
        return None, [f"importing {ref} failed: {_describe(e)}{_checkout_name_hint(e, ref)}"]
    return module, []


def _checkout_name_hint(error: BaseException, ref: str) -> str:
    """What to do when an adapter written for a checkout — a zoo entry (no wheel carries
    the zoo), or one importing ``spec``/``reference`` — is given to the installed mmspec,
    where those modules are ``mmspec.spec``/``mmspec.reference``: "" in any other case."""
    if not (names.INSTALLED and isinstance(error, ModuleNotFoundError) and error.name):
        return ""
    top = error.name.split(".")[0]
    if top not in _CHECKOUT_PACKAGES:
        return ""
    hint = (
        f" — `{top}` is a checkout's name; the installed mmspec has it as "
        f"`{names.module(top)}`: import that instead"
    )
    checkout = _checkout_holding(ref)
    if checkout is not None:
        relative = Path(ref).resolve().relative_to(checkout)
        hint += (
            f", or run it from the checkout it lies in: cd {checkout} && "
            f"PYTHONPATH=. python -m properties verify --adapter {relative}"
        )
    return hint


def _checkout_holding(ref: str) -> Path | None:
    """The mmspec checkout a path adapter lies in (a folder above it with a checkout's
    spec/adapter.py and harness/names.py, other than this installed copy's), or None."""
    if not (ref.endswith(".py") or "/" in ref or "\\" in ref):
        return None
    for folder in Path(ref).resolve().parents:
        if folder == names.HOME:
            return None
        if (folder / "spec" / "adapter.py").is_file() and (
            folder / "harness" / "names.py"
        ).is_file():
            return folder
    return None


def _describe(error: BaseException) -> str:
    """``Type: message (at file:line)``, the innermost frame outside importlib."""
    text = f"{type(error).__name__}: {error}"
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if "importlib" not in f.filename and "<frozen" not in f.filename
    ]
    if isinstance(error, SyntaxError) and error.filename:
        return f"{text}"
    if frames:
        last = frames[-1]
        text += f" (at {_relative(last.filename)}:{last.lineno})"
    return text


def _relative(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(CHECKOUT_ROOT))
    except ValueError:
        return filename


# --- the Protocol checks ----------------------------------------------------------------


def check_adapter(adapter: Adapter) -> list[str]:
    """Every problem of ``adapter``'s factories and their products, in component order."""
    problems: list[str] = []
    if not isinstance(adapter.name, str) or not adapter.name.strip():
        problems.append(f"ADAPTER.name must be a non-empty str, got {adapter.name!r}")
    for component, protocol in COMPONENTS:
        factory = getattr(adapter, component)
        if factory is None:
            continue
        if not callable(factory):
            problems.append(f"{component}: the factory is a {type(factory).__name__}, not callable")
            continue
        args = _SAMPLE_ARGS[component]
        if args is None:
            continue
        try:
            product = factory(*args)
        except Exception as e:  # noqa: BLE001 - any failure to build is a load problem
            shown = ", ".join(repr(a) for a in args)
            problems.append(f"{component}: factory({shown}) raised {_describe(e)}")
            continue
        problems.extend(f"{component}: {p}" for p in check_protocol(product, protocol))
    return problems


@functools.cache
def protocol_members(protocol: type) -> Mapping[str, Callable[..., Any] | property]:
    """The public methods and properties a Protocol declares (its bases included), read
    only: computed once per Protocol (an isolated grade asks it for every call a
    stand-in serves, hundreds of thousands of times)."""
    members: dict[str, Callable[..., Any] | property] = {}
    for klass in reversed(protocol.__mro__):
        if not getattr(klass, "_is_protocol", False) or klass.__module__ == "typing":
            continue
        for attr, value in vars(klass).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, property) or inspect.isfunction(value):
                members[attr] = value
    return MappingProxyType(members)


def check_protocol(product: object, protocol: type) -> list[str]:
    """What ``product`` lacks to meet ``protocol``: members present, methods callable
    with the Protocol's arguments, properties readable attributes."""
    problems: list[str] = []
    kind = type(product).__qualname__
    for attr, declared in protocol_members(protocol).items():
        if isinstance(declared, property):
            try:
                value = getattr(product, attr)
            except AttributeError:
                problems.append(f"{kind} lacks property {attr} of {protocol.__name__}")
                continue
            except Exception as e:  # noqa: BLE001 - reading it must not fail
                problems.append(f"{kind}.{attr} raised {_describe(e)} when read")
                continue
            if inspect.ismethod(value):
                problems.append(f"{kind}.{attr} must be a property (an attribute), not a method")
            continue
        if not hasattr(product, attr):
            problems.append(f"{kind} lacks method {attr}{_shown_signature(declared)}")
            continue
        method = getattr(product, attr)
        if not callable(method):
            problems.append(f"{kind}.{attr} is a {type(method).__name__}, not a method")
            continue
        problem = arity_problem(declared, method)
        if problem:
            problems.append(f"{kind}.{attr}: {problem}")
    return problems


_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)


def arity_problem(declared: Callable[..., Any], implemented: Callable[..., Any]) -> str | None:
    """Why ``implemented`` (bound) cannot be called as the Protocol's ``declared``
    (unbound, with ``self``) is called, or None. A method with ``*args`` accepts any
    number of positional arguments."""
    try:
        have = inspect.signature(implemented)
    except (TypeError, ValueError):
        return None  # builtins without a signature: nothing to compare
    want_params = list(inspect.signature(declared).parameters.values())[1:]
    want = [p for p in want_params if p.kind in _POSITIONAL]
    want_required = [p for p in want if p.default is inspect.Parameter.empty]
    params = list(have.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    star_args = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    keyword_only = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    expected = f"the Protocol's {declared.__name__}{_shown_signature(declared)}"
    if len(required) > len(want_required):
        return (
            f"requires {_count(len(required), 'argument')} {_names(required)}, "
            f"but {expected} passes only {len(want_required)}"
        )
    if not star_args and len(positional) < len(want):
        return (
            f"accepts only {_count(len(positional), 'argument')} {_names(positional)}, "
            f"but {expected} may pass {len(want)}"
        )
    if keyword_only:
        return f"requires keyword-only {', '.join(keyword_only)}, which {expected} never passes"
    return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _names(params: list[inspect.Parameter]) -> str:
    return "(" + ", ".join(p.name for p in params) + ")"


def _shown_signature(function: Callable[..., Any]) -> str:
    params = list(inspect.signature(function).parameters.values())[1:]
    return (
        "("
        + ", ".join(
            p.name if p.default is inspect.Parameter.empty else f"{p.name}=…" for p in params
        )
        + ")"
    )


# --- composing parts --------------------------------------------------------------------


def build_parts(
    adapter: Adapter, fallback: Adapter | None, absent: str = NOT_PROVIDED
) -> Parts:
    """One factory per component: the adapter's where it has one, ``fallback``'s (the
    reference) elsewhere, and a factory raising ``NotImplementedError`` where neither
    has one. ``Parts.provenance`` names the implementation behind each component
    (``absent`` for those nobody provides: :data:`NEEDS_REFERENCE` in the student kit)."""
    factories: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for component, _protocol in COMPONENTS:
        factory = getattr(adapter, component)
        owner = adapter.name
        if factory is not None and component in adapter.implemented_by:
            owner = f"{adapter.name}: {adapter.implemented_by[component]}"
        if factory is None and fallback is not None:
            factory = getattr(fallback, component)
            owner = fallback.name
        if factory is None:
            factory = _unavailable(component)
            owner = absent
        factories[component] = factory
        provenance[component] = owner
    engine_worker_store = None
    if adapter.engine_loop is None and adapter.worker_store is not None and fallback is not None:
        if fallback.engine_loop is not None and fallback.worker_store is not None:
            engine_worker_store = functools.partial(
                _directed_store, adapter.worker_store, fallback.worker_store
            )
    return Parts(**factories, provenance=provenance, engine_worker_store=engine_worker_store)


def _directed_store(own: Callable[[], Any], reference: Callable[[], Any]) -> Any:
    """The worker store the fallback's engine loop, standing in, is given: the adapter's,
    unless it keeps its own cache (``SelfManagedWorkerStore``, SGLang's): such a store
    takes no frees from a scheduler, and the engine loop directs its worker by them (WRK,
    "An engine without a scheduler-side encoder cache"), so the fallback's stands in."""
    store = own()
    return reference() if keeps_own_cache(store) else store


def _unavailable(component: str) -> Callable[..., Any]:
    def factory(*_args: object) -> Any:
        raise NotImplementedError(f"no implementation provides the {component} component")

    return factory


def make_siblings_importable(adapter_ref: str) -> None:
    """A student's adapter imports their own modules from the folder it lies in; that
    folder goes *after* the checkout on ``sys.path``, so it cannot shadow spec/. A
    package folder of the checkout (``adapters/``, ``adapters/zoo/``) is not added: its
    modules import through the package already, and ``adapters/`` on the path would make
    ``adapters/torch`` shadow the real torch for every later ``import torch``."""
    if not (adapter_ref.endswith(".py") or "/" in adapter_ref or "\\" in adapter_ref):
        return
    path = Path(adapter_ref).resolve()
    folder = path.parent
    if not path.exists() or str(folder) in sys.path:
        return
    in_checkout = folder == CHECKOUT_ROOT or CHECKOUT_ROOT in folder.parents
    if in_checkout and (folder / "__init__.py").exists():
        return
    sys.path.append(str(folder))
