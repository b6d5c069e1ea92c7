"""vLLM's module, loaded by path at run time (never copied): the base of the
``upstream`` ports and rewrites."""

from __future__ import annotations

from types import ModuleType

from auxspec.engine.target import load_module_from_path, upstream_path


def load() -> ModuleType:
    path = upstream_path()
    if path is None:
        raise ImportError("vLLM's module is not available (set AUXSTORE_UPSTREAM)")
    return load_module_from_path(path)


vllm = load()
