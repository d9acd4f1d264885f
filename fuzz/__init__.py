"""Coverage-guided fuzzing of the registered properties (docs/fuzz.md).

atheris (libFuzzer's engine for Python) mutates byte strings; Hypothesis'
``fuzz_one_input`` turns each into one test case of a property, and saves a failing one
to the example database: a directory under ``.hypothesis/examples/<adapter identity>/``,
or — shared between workers and machines — a Redis database under the adapter's key
prefix, which verification runs replay read-only (:mod:`harness.profiles`).

- :mod:`fuzz.targets`: the properties as fuzz targets, and the dispatcher atheris calls;
- :mod:`fuzz.run`: the atheris driver (``make fuzz``);
- :mod:`fuzz.replay`: replay what the databases hold for an adapter, generating nothing.
"""
