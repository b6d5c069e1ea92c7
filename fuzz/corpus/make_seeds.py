#!/usr/bin/env python3
"""Seed the committed corpora from the conformance vectors, then minimize.

    fuzz/corpus/make_seeds.py [--python .venv/bin/python] [harness...]

Seeds: store and upstream get every vector of their profile (bundled and
regressions) encoded with ``auxspec.fuzzing.encode``; background gets the
store seeds behind a few writer schedules and faults; trace_parser gets the
vector files themselves. Each corpus is then rebuilt with libFuzzer's
``-merge=1`` into an empty folder from (old corpus + seeds), which keeps the
smallest set of inputs that reaches the same coverage.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUZZ = HERE.parent
VECTORS = FUZZ.parent / "spec" / "auxspec" / "vectors"

# (config byte, schedule) pairs put in front of each owner-call seed:
# writer idle, writer released before every call, a full queue with bound 1,
# and an injected fault at the first and second inner call.
BACKGROUND_PREFIXES = (
    (0, b""),
    (1, b"\x01" * 12),
    (0, b"\x00\x14\x00\x18\x00\x10\x20\x02"),
    (3, b"\x00\x01"),
    (9 + 36, b"\x02\x00\x03\x10"),
    (5 + 72, b"\x00\x00\x01\x14"),
)


def seeds(name: str) -> list[bytes]:
    from auxspec import verify
    from auxspec.fuzzing import encode

    files = sorted(VECTORS.rglob("*.jsonl"))
    if name == "trace_parser":
        return [path.read_bytes() for path in files]
    profile = "upstream" if name == "upstream" else "strict"
    encoded = [encode(vector.trace) for vector in verify.load_vectors(files) if vector.trace.profile == profile]
    found = [data for data in encoded if data is not None]
    if name == "background":
        return [
            bytes([config, len(schedule)]) + schedule + data
            for config, schedule in BACKGROUND_PREFIXES
            for data in found
        ]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("harness", nargs="*", default=["store", "upstream", "background", "trace_parser"])
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    # -merge=1 re-runs the harness through its shebang: `env python3` must find atheris.
    args.python = os.path.abspath(args.python) if os.sep in args.python else args.python
    os.environ["PATH"] = os.path.dirname(args.python) + os.pathsep + os.environ.get("PATH", "")
    for name in args.harness:
        corpus = HERE / name
        corpus.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"seeds-{name}-") as scratch:
            fresh, merged = Path(scratch) / "seeds", Path(scratch) / "merged"
            fresh.mkdir()
            merged.mkdir()
            for data in seeds(name):
                (fresh / hashlib.sha1(data).hexdigest()).write_bytes(data)
            command = [args.python, str(FUZZ / f"{name}_fuzzer.py"), "-merge=1", str(merged), str(corpus), str(fresh)]
            result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
            kept = sorted(merged.iterdir())
            if result.returncode != 0 or not kept or "Traceback" in result.stderr:
                print(f"{name}: merge failed ({result.returncode}); corpus left as it was\n{result.stderr[-2000:]}")
                continue
            shutil.rmtree(corpus)
            shutil.copytree(merged, corpus)
            print(f"{name}: {len(kept)} inputs after merge")
    return 0


if __name__ == "__main__":
    sys.exit(main())
