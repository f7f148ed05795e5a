#!/usr/bin/env bash
# Installs what frugal needs from Debian's packages, only what is missing.
# Idempotent; run as root (or with sudo available).
set -euo pipefail

packages=(
  g++ cmake make pkg-config
  libprotobuf-dev protobuf-compiler
  libgoogle-glog-dev libgflags-dev
  libgtest-dev coinor-libcbc-dev
  libdnnl-dev zlib1g-dev
  libgoogle-perftools-dev
  libonnx-dev libonnx-testdata
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev clang-format-14
  python3 python3-onnx python3-dev python3-numpy python3-pybind11 python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel
  dataset-fashion-mnist fortunes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
