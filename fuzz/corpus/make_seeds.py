#!/usr/bin/env python3
"""Seed the committed corpora from the conformance vectors, then minimize;
write the dictionaries.

    fuzz/corpus/make_seeds.py [--python .venv/bin/python] [harness...]
    fuzz/corpus/make_seeds.py --dictionaries

Seeds: store, invariants and model get every vector of their profile
(bundled and regressions) encoded with ``auxspec.engine.codec.encode`` (behind a
corruption byte for invariants, a profile byte for model, which takes both
profiles); upstream gets the upstream vectors; background gets the store
seeds behind a few configurations and writer schedules; trace_parser gets
the vector files themselves and the protocol doc's requests. Each corpus is then rebuilt with libFuzzer's
``-merge=1`` into an empty folder from (old corpus + seeds), which keeps the
smallest set of inputs that reaches the same coverage.

``--dictionaries`` rewrites fuzz/<harness>.dict from
``auxspec.drivers.fuzzing.dictionary`` (all but trace_parser's, which is JSON text
written by hand); tests/test_fuzz_corpus.py checks they are current.
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
HARNESSES = ("store", "upstream", "background", "trace_parser", "model", "invariants")
DICTIONARIES = ("store", "upstream", "background", "model", "invariants")

# (config byte, schedule) put in front of each owner-call seed: writer idle,
# writer released before every call, a full queue with bound 1, an injected
# fault at the first and at the second inner call, and the constructor's
# refusals (a bound of 0, a bool, a None inner store).
BACKGROUND_PREFIXES = (
    (0, b""),
    (1, b"\x01" * 12),
    (0, b"\x00\x00\x00\x01\x00\x02"),
    (3, b"\x00\x01"),
    (9 + 36, b"\x02\x00\x03\x01"),
    (5 + 72, b"\x00\x00\x01\x03"),
    (250, b""),
    (252, b""),
    (255, b""),
)


def seeds(name: str) -> list[bytes]:
    from auxspec import verify
    from auxspec.engine.codec import SPECIAL_SIZES, encode

    files = sorted(VECTORS.rglob("*.jsonl"))
    if name == "trace_parser":
        # The vector files, and the requests of the protocol doc's exchange (auxspec serve reads both).
        doc = (FUZZ.parent / "docs" / "protocol.md").read_text().split("## A full exchange", 1)[1]
        requests = "".join(line[2:] + "\n" for line in doc.splitlines() if line.startswith("> "))
        return [path.read_bytes() for path in files] + [requests.encode()]
    vectors = verify.load_vectors(files)

    def encoded(profile: str) -> list[bytes]:
        found = [encode(v.trace) for v in vectors if v.trace.profile == profile]
        return [data for data in found if data is not None]

    if name == "upstream":
        return encoded("upstream")
    strict = encoded("strict")
    if name == "background":
        prefixes = [bytes([config, len(schedule)]) + schedule for config, schedule in BACKGROUND_PREFIXES]
        return [prefix + data for prefix in prefixes for data in strict]
    if name == "model":
        # Both profiles build every store that cannot be built (the vectors hold only some).
        sizes = [bytes([profile, selector]) for profile in (0, 1) for selector in range(SPECIAL_SIZES + 8, 256)]
        return [b"\x00" + data for data in strict] + [b"\x01" + data for data in encoded("upstream")] + sizes
    if name == "invariants":
        # Every corruption pair (store x model) behind every vector, in turn.
        return [bytes([index % 100]) + data for index, data in enumerate(strict * 4)]
    return strict


def write_dictionaries() -> None:
    from auxspec.drivers.fuzzing import dictionary_text

    for name in DICTIONARIES:
        (FUZZ / f"{name}.dict").write_text(dictionary_text(name))
        print(f"wrote fuzz/{name}.dict")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("harness", nargs="*", default=list(HARNESSES))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--dictionaries", action="store_true", help="only rewrite the dictionaries")
    args = parser.parse_args()
    if args.dictionaries:
        write_dictionaries()
        return 0
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
