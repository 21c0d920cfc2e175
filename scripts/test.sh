#!/usr/bin/env bash
# Runs the whole test suite (Catch2 C++ tests and the Python tests they
# host), through ctest. Extra arguments go to ctest (e.g. -R cli).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
export ACCELOPT_NO_PROGRESS=1
# Every host call into the Python tree is checked against its declared schema (accelopt.api).
export ACCELOPT_API_VALIDATE=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
