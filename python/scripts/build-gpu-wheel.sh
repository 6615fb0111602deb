#!/usr/bin/env bash
# Build the logot wheel (abi3: any CPython >= 3.9; the CUDA backend is always compiled in,
# python/Cargo.toml turns on the library's `cuda` feature, and cudarc loads the driver and
# NVRTC at run time) on a machine with Rust, for a machine without it (the GPU image: Python
# and torch, no cargo). There: `pip install --no-deps --force-reinstall OUT_DIR/logot-*.whl`.
#
#   bash python/scripts/build-gpu-wheel.sh OUT_DIR [--native]
#
# Default: a manylinux2014 wheel (glibc >= 2.17, so any current Linux image) linked by zig
# (`maturin build --zig`; the `maturin` and `ziglang` packages must be importable by
# $PYTHON, default python3: `pip install maturin ziglang`). --native links with this
# machine's toolchain instead; the wheel then needs this machine's glibc or newer, and
# maturin's auditwheel check tags it accordingly (e.g. manylinux_2_35).
# Prints the wheel's path and size, and the newest glibc symbol version it references.
set -euo pipefail

out=${1:?usage: build-gpu-wheel.sh OUT_DIR [--native]}
mode=${2:-zig}
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)   # python/
mkdir -p "$out"
out=$(cd "$out" && pwd)

# maturin finds zig as `python3 -m ziglang` on PATH: the interpreter's own directory first.
pybin=$(dirname "$(command -v "$python")")
export PATH="$pybin:$PATH"
"$python" -m maturin --version >/dev/null 2>&1 || { echo "maturin is missing: $python -m pip install maturin ziglang" >&2; exit 2; }
args=(build --release --manifest-path "$here/Cargo.toml" --out "$out" --interpreter "$python")
case "$mode" in
  zig|--zig) args+=(--zig --compatibility manylinux2014) ;;
  --native) ;;
  *) echo "unknown option $mode (expected --native)" >&2; exit 2 ;;
esac
# A wheel left from an earlier build would make the path below ambiguous.
rm -f "$out"/logot-*.whl
"$python" -m maturin "${args[@]}"

wheel=$(ls "$out"/logot-*.whl)
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1), $(stat -c %s "$wheel") bytes)"
if command -v objdump >/dev/null && command -v unzip >/dev/null; then
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'logot/_logot*.so' -d "$tmp"
  newest=$(objdump -T "$tmp"/logot/_logot*.so | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "newest glibc symbol version referenced: $newest"
  rm -rf "$tmp"
fi
