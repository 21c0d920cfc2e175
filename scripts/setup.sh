#!/usr/bin/env bash
# Installs the Debian packages accelopt-host needs, builds it, and links
# `accelopt-host` into /usr/local/bin (when writable). Safe to re-run.
#
#   scripts/setup.sh            # Release-ish build in ./build
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"

PACKAGES=(
  build-essential cmake pkg-config git
  python3.11 python3.11-dev python3-numpy pybind11-dev libopenblas0-pthread
  liblua5.4-dev libyaml-cpp-dev libspdlog-dev libfmt-dev catch2 nlohmann-json3-dev
  libcurl4-openssl-dev libcli11-dev libsqlite3-dev libsqlitecpp-dev
  libkainjow-mustache-dev libcpp-httplib-dev libssl-dev libseccomp-dev
  python3-matplotlib chromium   # report charts (docs/reports.md); chromium only for the screenshot test
  python3-torch                 # CPU torch: FlashInfer-Bench references and python solutions (docs/flashinfer.md)
  slurm-wlm munge               # the one-node cluster of scripts/slurm-local.sh (docs/scale-out.md)
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# NumPy must use OpenBLAS (a 4096x5120x12288 fp32 matmul: 94 s with the
# reference BLAS, 2.5 s with OpenBLAS on our 2-core machines).
if command -v update-alternatives >/dev/null; then
  blas=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
  [[ -n "$blas" ]] && update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null 2>&1 || true
  lapack=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
  [[ -n "$lapack" ]] && update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack" >/dev/null 2>&1 || true
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCEL_PYTHON=/usr/bin/python3.11 >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

build_path=$(cd "$BUILD_DIR" && pwd)  # BUILD_DIR may be relative or absolute
if [[ -w /usr/local/bin ]]; then
  ln -sf "$build_path/accelopt-host" /usr/local/bin/accelopt-host
  echo "setup: accelopt-host -> $build_path/accelopt-host"
else
  echo "setup: add $build_path to PATH to call accelopt-host"
fi

# The emulator's neuron-profile stand-in (docs/nki-emulator.md, "Running the peers' harnesses
# unmodified") goes to $BUILD_DIR/emu-bin, and to /usr/local/bin only where no real
# neuron-profile is installed; it hands real NEFFs to the next neuron-profile on PATH anyway.
mkdir -p "$BUILD_DIR/emu-bin"
ln -sf "$PWD/scripts/neuron-profile" "$BUILD_DIR/emu-bin/neuron-profile"
if ! command -v neuron-profile >/dev/null 2>&1 && [[ ! -x /opt/aws/neuron/bin/neuron-profile && -w /usr/local/bin ]]; then
  ln -sf "$PWD/scripts/neuron-profile" /usr/local/bin/neuron-profile
  echo "setup: neuron-profile (emulator stand-in) -> $PWD/scripts/neuron-profile"
else
  echo "setup: emulator neuron-profile stand-in in $build_path/emu-bin (prepend it to PATH for AccelOpt's harness)"
fi
