"""An engine's release tree is unpacked once, compiled once (adapters/release_wheel.py).

A tree left as source is compiled again by every process that imports it where
``PYTHONDONTWRITEBYTECODE`` is set (this machine, CI's): the unpacking compiles it, for
the interpreter that fetched it, and the compiled modules name the tree, not the
temporary folder they were compiled in."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT


def _release_wheel() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_test_release_wheel", ROOT / "adapters" / "release_wheel.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_an_unpacked_tree_is_compiled_where_it_lies(tmp_path: Path) -> None:
    release_wheel = _release_wheel()
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    wheel = cache / "wheels" / "toyengine-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("toyengine/__init__.py", "")
        source = "def where():\n    return where.__code__.co_filename\n"
        archive.writestr("toyengine/core.py", source)
        archive.writestr("toyengine/_native.so", b"\x7fELF")  # never unpacked
        archive.writestr("toyengine-1.2.3.dist-info/METADATA", "Name: toyengine\n")
    releases = release_wheel.ReleaseWheel("toyengine", "Toy", "1.2.3", compiled=True)
    tree = releases.fetch("1.2.3", cache, quiet=True)

    assert tree == cache / "toyengine-1.2.3"
    assert not (tree / "toyengine" / "_native.so").exists()
    tag = sys.implementation.cache_tag
    assert (tree / "toyengine" / "__pycache__" / f"core.{tag}.pyc").is_file()
    assert not list(cache.glob("*.partial"))

    # a process that may not write bytecode loads the compiled modules (it compiles no
    # source), and they name the tree
    probe = (
        "import importlib._bootstrap_external as loading\n"
        "compiled = []\n"
        "source_to_code = loading.SourceLoader.source_to_code\n"
        "def counted(self, data, path, *args, **kwargs):\n"
        "    compiled.append(path)\n"
        "    return source_to_code(self, data, path, *args, **kwargs)\n"
        "loading.SourceLoader.source_to_code = counted\n"
        "import toyengine.core as core\n"
        "print(len(compiled)); print(core.__cached__); print(core.where())\n"
    )
    completed = subprocess.run(
        [sys.executable, "-B", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}, check=True,
    )
    compiled, cached, where = completed.stdout.split()
    assert compiled == "0"
    assert Path(cached).is_file()
    assert where == str(tree / "toyengine" / "core.py")


def test_only_an_engine_that_asks_gets_its_tree_compiled(tmp_path: Path) -> None:
    """vLLM's fetch compiles (its job imports the tree dozens of times), SGLang's does
    not (its trees cost more to compile than its few processes would save)."""
    for engine, compiled in (("vllm", True), ("sglang", False)):
        spec = importlib.util.spec_from_file_location(
            f"_test_{engine}_fetch", ROOT / "adapters" / engine / "fetch.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert module.RELEASES.compiled is compiled, engine
