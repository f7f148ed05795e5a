#!/bin/bash
# The GPU check of issue #8: runs the CUDA tests (tests/backend/cuda_test.cc and
# tests/backend/cuda_train_test.cc: ops and recomputation against the CPU, training
# on one GPU, and on two with NCCL where there are two), then benchmarks ResNet-50
# (ImageNet shapes, batch 64) and the 1,000-layer ResNet (depth 1001, batch
# 32) with memory strategies share and sqrt: images/s and device memory
# (planned arena, allocated, peak) from `frugal time --gpus 0`, and, where
# PyTorch with CUDA is installed, PyTorch's images/s and peak memory on the
# same net (plain and with torch.utils.checkpoint). Sized to finish within 8
# minutes on one H200; every step has its own timeout.
#
# Two modes, because the GPU machine lacks Debian's protobuf, glog, gflags,
# oneDNN and OpenCV libraries (it has the CUDA toolkit's libraries
# and the driver):
#
#   tools/gpu_check.sh pack     on the build machine: builds with
#                               -DFRUGAL_CUDA=ON into build/ (if needed) and
#                               packs frugal, frugal_tests and the shared
#                               libraries `ldd` lists, except glibc's, the
#                               driver's and the CUDA toolkit's (found on the
#                               GPU machine under /usr/local/cuda) and
#                               OpenCV's image codecs (an empty stand-in: the
#                               check decodes no image), into
#                               gpu_bundle/bundle.tar.xz (git-ignored; about
#                               115 MB unpacked, xz brings it under the 64 MiB
#                               a device run carries).
#   tools/gpu_check.sh [run]    on the GPU machine, from the repository root,
#                               with gpu_bundle/ carried along, e.g. through
#                               the session's device tool:
#                                 run(command="bash tools/gpu_check.sh",
#                                     carry=["gpu_bundle"], timeout_s=540)
#                               Falls back to build/ where there is no bundle.
#
# Output: one line per result, "== <what>" headers, and a summary at the end
# that docs/benchmarks.md ("GPU") takes its figures from; copies go to
# $OUT/gpu_check.log when $OUT is set.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUNDLE=$ROOT/gpu_bundle

pack() {
  set -e
  if [ ! -x build/frugal ] || ! grep -q "^FRUGAL_CUDA_LIBS\|frugal_cuda" build/Makefile 2>/dev/null; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFRUGAL_CUDA=ON
  fi
  nice cmake --build build -j2 --target frugal_cli frugal_tests
  local stage=/tmp/frugal_gpu_stage
  rm -rf "$stage" "$BUNDLE"
  mkdir -p "$stage/bin" "$stage/lib" "$BUNDLE"
  cp build/frugal build/tests/frugal_tests "$stage/bin/"
  # The closure of the binaries' libraries, without glibc, the driver and
  # the CUDA toolkit (the GPU machine has them), and without OpenCV's image
  # codecs, whose dependencies (GDAL, poppler, HDF5, x265, ...) are most of
  # the 250 MB: frugal opens them as a module on the first image
  # (libfrugal_imgcodecs.so, not packed); the tests link them for their
  # fixtures, and the check runs none of those, so an empty library with the
  # same name stands in for it (the binaries bind functions lazily; a call
  # would fail with "undefined symbol").
  local direct lib path
  direct=$(for bin in "$stage"/bin/*; do readelf -d "$bin" | awk '/NEEDED/ { gsub(/[][]/, "", $5); print $5 }'; done | sort -u)
  for lib in $direct; do
    case "$lib" in
      libc.so*|libm.so*|libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libopencv_imgcodecs*) continue ;;
    esac
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    echo "$path"
    ldd "$path" | awk '/=> \// { print $3 }'
  done | sort -u | while read -r path; do
    case "$(basename "$path")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) continue ;;
    esac
    case "$path" in /usr/local/cuda*|/usr/local/lib/libcudnn*|/usr/local/lib/libnccl*) continue ;; esac
    cp -L "$path" "$stage/lib/"
  done
  for lib in $direct; do
    case "$lib" in
      libopencv_imgcodecs*)
        echo 'void frugal_gpu_bundle_stub(void) {}' > "$stage/stub.c"
        gcc -shared -fPIC -o "$stage/lib/$lib" -Wl,-soname,"$lib" "$stage/stub.c"
        rm "$stage/stub.c" ;;
    esac
  done
  strip --strip-unneeded "$stage"/bin/* 2>/dev/null || true
  # A smoke test here, with only the bundle's libraries (CPU).
  LD_LIBRARY_PATH="$stage/lib" "$stage/bin/frugal" time --config models/mlp/fashion_mnist.prototxt --iters 1 \
    --warmup 0 >/dev/null
  tar -C "$stage" -cf - bin lib | nice xz -T2 -9 > "$BUNDLE/bundle.tar.xz"
  rm -rf "$stage"
  du -sh "$BUNDLE"
  local kib
  kib=$(du -sk "$BUNDLE" | cut -f1)
  if [ "$kib" -gt 63000 ]; then
    echo "gpu_bundle is $kib KiB: over the 64 MiB a device run carries" >&2
    exit 1
  fi
  echo "packed: carry gpu_bundle and run: bash tools/gpu_check.sh"
}

run() {
  local bin=$ROOT/build
  local tests=$ROOT/build/tests/frugal_tests
  if [ -f "$BUNDLE/bundle.tar.xz" ]; then
    local unpacked=/tmp/frugal_gpu_bundle
    rm -rf "$unpacked" && mkdir -p "$unpacked"
    xz -dc "$BUNDLE/bundle.tar.xz" | tar -C "$unpacked" -xf -
    bin=$unpacked/bin
    tests=$unpacked/bin/frugal_tests
    export LD_LIBRARY_PATH="$unpacked/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/lib:${LD_LIBRARY_PATH:-}"
  fi
  local log=${OUT:-/tmp}/gpu_check.log
  : > "$log"
  say() { echo "$@" | tee -a "$log"; }
  # Each step gets at most its own limit and never runs past 450 s in all.
  limit() { local left=$((450 - SECONDS)); [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }
  in_time() { [ "$SECONDS" -lt 440 ] || { say "(skipped: the 8-minute budget is spent)"; return 1; }; }
  unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE  # benchmark figures (see STYLE/helper notes)
  say "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"

  say "== CUDA tests"
  # The CLI tests call the frugal binary by its build-machine path: not here.
  timeout "$(limit 150)" "$tests" --gtest_filter='Cuda*:-CudaCli.*' 2>&1 | tail -n 40 | tee -a "$log"
  say "tests exit code: ${PIPESTATUS[0]}"

  local cfg=models/resnet/resnet_imagenet.prototxt
  for spec in "50 64 share" "50 64 sqrt" "1001 32 share" "1001 32 sqrt"; do
    set -- $spec
    say "== frugal resnet depth $1 batch $2 memory $3"
    in_time || continue
    timeout "$(limit 75)" "$bin/frugal" time --config $cfg --define depth=$1 --batch $2 --memory $3 --gpus 0 \
      --iters 5 --warmup 2 2>&1 | grep -E "step on|device memory|Error|error|rror:" | tee -a "$log"
  done

  if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    for spec in "50 64" "50 64 --checkpoint" "1001 32" "1001 32 --checkpoint"; do
      set -- $spec
      say "== pytorch resnet depth $1 batch $2 ${3:-plain}"
      in_time || continue
      timeout "$(limit 60)" python3 tools/bench/torch_resnet_gpu.py --depth $1 --batch $2 ${3:-} --iters 5 --warmup 2 2>&1 \
        | tail -n 3 | tee -a "$log"
    done
  else
    say "== pytorch: not installed with CUDA here (python3 -c 'import torch' failed or no GPU): skipped"
  fi
  say "== done"
}

case "${1:-run}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: tools/gpu_check.sh [pack|run]" >&2; exit 2 ;;
esac
