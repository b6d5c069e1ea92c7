#!/bin/bash -eu
# OSS-Fuzz: projects/auxstore/build.sh. The project's Dockerfile clones the
# repository into $SRC/auxstore; the build is the ClusterFuzzLite one.
exec bash "$SRC/auxstore/.clusterfuzzlite/build.sh"
