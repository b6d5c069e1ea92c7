"""What the mutation drivers share: the staging folder mutmut runs in, the
mutants it generated, a seeded sample of them, and one mutant's source.

mutmut 3 names a mutant after the path of its file (``auxstore._store.x…``)
and its trampolines switch on that name against the running module's
``__name__``, so the packages must sit at the top of the folder mutmut runs
in. This repository keeps them in ``impl/`` and ``spec/``; ``stage`` copies
them to ``build/mutation/`` as ``auxstore/`` and ``auxspec/`` together with
the tests and ``pyproject.toml`` (whose ``[tool.mutmut]`` is written for that
layout).

A sample is drawn by seed from the mutants that exist now, not from a list of
names, so it follows the code as it changes (a fixed list would go stale as
soon as a function is renamed or moved).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAGE = REPO / "build" / "mutation"
# What the stage holds: its name there -> its path in the repository.
LAYOUT = {
    "auxstore": "impl/auxstore",
    "auxspec": "spec/auxspec",
    "tests": "tests",
    "tools": "tools",
    "ports": "ports",
    "fuzz": "fuzz",
    "benchmarks": "benchmarks",
    "docs": "docs",  # test_architecture checks docs/background.md's table against the model
    "pyproject.toml": "pyproject.toml",
}
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "artifacts", "auxport")

# The modules whose mutants are also run through ``auxspec verify``.
STORE_MODULES = ("auxstore._store", "auxstore._background", "auxstore._batch", "auxstore._errors")

_GENERATE = """
import os
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants, setup_source_paths
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
copy_src_dir()
copy_also_copy_files()
setup_source_paths()
print(create_mutants(1))
"""


def stage(root: Path = STAGE) -> Path:
    """A fresh copy of the sources in mutmut's layout at ``root``."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name, source in LAYOUT.items():
        origin = REPO / source
        if origin.is_dir():
            shutil.copytree(origin, root / name, ignore=_IGNORED)
        elif origin.is_file():
            shutil.copy2(origin, root / name)
    return root


def generate(root: Path = STAGE) -> None:
    """Let mutmut write every mutant into ``root/mutants`` (no test runs)."""
    subprocess.run([sys.executable, "-c", _GENERATE], cwd=root, check=True, stdout=subprocess.DEVNULL)


def mutants(root: Path = STAGE) -> dict[str, str]:
    """Every mutant generated under ``root``: its name -> its file, relative to ``root``."""
    found: dict[str, str] = {}
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        relative = meta.relative_to(root / "mutants").as_posix()[: -len(".meta")]
        for name in json.loads(meta.read_text())["exit_code_by_key"]:
            found[name] = relative
    return found


def module_of(name: str) -> str:
    """``auxstore._store`` for ``auxstore._store.xǁBlockObjectStoreǁput__mutmut_3``."""
    from mutmut.utils.format_utils import get_module_from_key

    return get_module_from_key(name)


def sample(names: Iterable[str], size: int | None, seed: int) -> list[str]:
    """``size`` of ``names`` drawn by ``seed`` (all of them when ``size`` is None), in name order."""
    ordered = sorted(names)
    if size is None or size >= len(ordered):
        return ordered
    return sorted(random.Random(seed).sample(ordered, size))


def statuses(root: Path = STAGE) -> dict[str, str]:
    """mutmut's verdict on each mutant under ``root`` (``killed``, ``survived``, ``not checked``...)."""
    from mutmut.stats import status_by_exit_code

    found: dict[str, str] = {}
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found[name] = status_by_exit_code[code]
    return found


def mutated_source(name: str, root: Path = STAGE) -> tuple[str, str]:
    """The file holding mutant ``name`` (relative to ``root``) and its source
    with that one mutant applied: the original file with the mutated function
    in place of the original one (the one of the right class)."""
    import libcst as cst
    from mutmut.mutation.diff_apply import read_functions_from_index, read_mutant_function
    from mutmut.utils.format_utils import mangled_name_from_mutant_name, parse_mutant_key

    relative = mutants(root)[name]
    # mutmut's line index reads just the two functions; parsing the whole
    # mutated file (every mutant of the module) takes tens of seconds.
    previous = Path.cwd()
    os.chdir(root)
    try:
        indexed = read_functions_from_index(name, relative)
    finally:
        os.chdir(previous)
    if indexed is not None:
        replacement = indexed[1]
    else:
        replacement = read_mutant_function(cst.parse_module((root / "mutants" / relative).read_text()), name)
    function, cls = parse_mutant_key(mangled_name_from_mutant_name(name.rpartition(".")[2]))
    original = cst.parse_module((root / relative).read_text())
    body: Sequence[cst.CSTNode] = original.body
    if cls is not None:
        owner = next((n for n in body if isinstance(n, cst.ClassDef) and n.name.value == cls), None)
        if owner is None or not isinstance(owner.body, cst.IndentedBlock):
            raise LookupError(f"{relative} has no class {cls}")
        body = owner.body.body
    target = next((n for n in body if isinstance(n, cst.FunctionDef) and n.name.value == function), None)
    if target is None:
        raise LookupError(f"{relative} has no function {cls + '.' if cls else ''}{function}")
    mutated = original.deep_replace(target, replacement)
    if not isinstance(mutated, cst.Module):
        raise TypeError(f"replacing {function} in {relative} did not give a module")
    return relative, mutated.code


def diff(name: str, root: Path = STAGE) -> str:
    """The unified diff of mutant ``name`` (mutmut's own rendering)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    path = mutants(root)[name]
    previous = Path.cwd()
    os.chdir(root)
    try:
        return get_diff_for_mutant(name, path=path)
    finally:
        os.chdir(previous)


def report(
    per_module: dict[str, Counter[str]],
    score: Callable[[Counter[str]], float],
    verb: str,
    elapsed: float,
    floor: float | None,
) -> int:
    """Print the score per module and in all; 1 when it is below ``floor``, else 0."""
    total: Counter[str] = Counter()
    for module, counts in sorted(per_module.items()):
        total += counts
        print(f"{module}: {score(counts):.1f}% {verb} ({dict(counts)})")
    print(f"all: {score(total):.1f}% {verb} of {sum(total.values())} ({dict(total)}); elapsed {elapsed:.0f} s")
    if floor is not None and score(total) < floor:
        print(f"below the floor of {floor:g}%")
        return 1
    return 0
