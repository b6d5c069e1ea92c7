#!/bin/bash -eu
# Builds the atheris harnesses for ClusterFuzzLite and OSS-Fuzz (run by the
# base-builder-python image with $SRC, $OUT and $WORK set; see docs/fuzzing.md).
#
# For each fuzz/<name>_fuzzer.py: a packaged fuzzer $OUT/<name>_fuzzer (made by
# compile_python_fuzzer), its seed corpus $OUT/<name>_fuzzer_seed_corpus.zip
# from fuzz/corpus/<name>/, and its dictionary $OUT/<name>_fuzzer.dict.
cd "$SRC/auxstore"

# The project with its fuzz extra (atheris is already in the image, so pip
# keeps that build, which matches the image's libFuzzer).
pip3 install '.[fuzz]'

for fuzzer in fuzz/*_fuzzer.py; do
  name=$(basename -s .py "$fuzzer")
  short=${name%_fuzzer}
  if [ "$short" = upstream ]; then
    # It fuzzes vLLM's module, which is loaded from beside the checkout and
    # never shipped with auxstore: nothing to fuzz in the image.
    echo "build.sh: skipping $name (needs vLLM's module, not in the image)"
    continue
  fi
  compile_python_fuzzer "$fuzzer"
  if [ -d "fuzz/corpus/$short" ]; then
    # python3 -m zipfile rather than zip: the same command works wherever python does.
    (cd "fuzz/corpus/$short" && python3 -m zipfile -c "$OUT/${name}_seed_corpus.zip" ./*)
  fi
  if [ -f "fuzz/$short.dict" ]; then
    cp "fuzz/$short.dict" "$OUT/$name.dict"
  fi
done
