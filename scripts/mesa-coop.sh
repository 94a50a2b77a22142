#!/usr/bin/env bash
# The real cooperative-matrix convolution (native/gpu/src/ops/mma.rs) on a CPU: Mesa 26's lavapipe
# lists 8x8x8 f16 x f16 -> f32 cooperative matrices (VK_KHR_cooperative_matrix), Debian bookworm's
# Mesa 22.3 and bookworm-backports' 25.0 do not. Mesa 26 needs a newer C library than bookworm's,
# so it lives in a small Debian trixie root (debootstrap + trixie-backports' mesa-vulkan-drivers
# and trixie's spirv-tools 2025.1, about 700 MB, git-ignored) and only the test process runs on
# that root's dynamic loader and libraries; nothing is installed on the host and no chroot or
# mount is needed to run.
#
#   bash scripts/mesa-coop.sh prepare          # once, as root (debootstrap, apt): builds the root
#   bash scripts/mesa-coop.sh test             # the `real_coop_*` tests of native/gpu/tests/mma.rs,
#                                              # and every shader variant through the newer spirv-val
#                                              # (bookworm's 2023.1 predates cooperative matrices)
#   bash scripts/mesa-coop.sh exec CMD [ARG..]  # any command's process on Mesa 26's lavapipe
#
# LUCENT_MESA_COOP_ROOT overrides the root's place (default data/mesa-coop). `npm test` runs
# `test` when the root is ready (.ci/run prepares it).
set -euo pipefail
cd "$(dirname "$0")/.."
R=$(realpath -m "${LUCENT_MESA_COOP_ROOT:-data/mesa-coop}")
SUITE=trixie
LIB=$R/usr/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu

case "${1:-}" in
prepare)
  if [ -f "$R/.ready" ]; then echo "mesa-coop: $R ready ($(cat "$R/.ready"))"; exit 0; fi
  [ "$(uname -m)" = x86_64 ] || { echo "mesa-coop: x86_64 only"; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "mesa-coop: prepare needs root (debootstrap, apt in the new root)"; exit 1; }
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } \
    || { echo "mesa-coop: cannot install debootstrap"; exit 1; }
  rm -rf "$R" && mkdir -p "$(dirname "$R")"
  debootstrap --variant=minbase "$SUITE" "$R" http://deb.debian.org/debian >"$R.log" 2>&1 \
    || { tail -5 "$R.log"; echo "mesa-coop: debootstrap failed"; exit 1; }
  echo "deb http://deb.debian.org/debian $SUITE-backports main" >"$R/etc/apt/sources.list.d/backports.list"
  chroot "$R" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t $SUITE-backports mesa-vulkan-drivers libvulkan1 spirv-tools" >>"$R.log" 2>&1 \
    || { tail -5 "$R.log"; echo "mesa-coop: apt-get in the root failed"; exit 1; }
  # The ICD manifest with the driver's absolute path inside the root.
  printf '{"file_format_version":"1.0.1","ICD":{"api_version":"1.4.0","library_path":"%s"}}\n' \
    "$R/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" >"$R/lucent-lvp-icd.json"
  printf '#!/bin/sh\nexec "%s/lib64/ld-linux-x86-64.so.2" --library-path "%s" "%s/usr/bin/spirv-val" "$@"\n' "$R" "$LIB" "$R" >"$R/lucent-spirv-val"
  chmod +x "$R/lucent-spirv-val"
  chroot "$R" dpkg-query -W -f '${Package} ${Version}\n' mesa-vulkan-drivers >"$R/.ready"
  rm -f "$R.log"
  echo "mesa-coop: $R ready ($(cat "$R/.ready"))"
  ;;
exec)
  shift
  [ -f "$R/.ready" ] || { echo "mesa-coop: $R is not prepared (bash scripts/mesa-coop.sh prepare)"; exit 1; }
  exec env VK_DRIVER_FILES="$R/lucent-lvp-icd.json" VK_ICD_FILENAMES="$R/lucent-lvp-icd.json" \
    "$R/lib64/ld-linux-x86-64.so.2" --library-path "$LIB" "$@"
  ;;
test)
  [ -f "$R/.ready" ] || { echo "mesa-coop: $R is not prepared (bash scripts/mesa-coop.sh prepare)"; exit 1; }
  bin=$(cargo test --release -p lucent-gpu --test mma --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
  [ -x "$bin" ] || { echo "mesa-coop: could not build the mma test binary"; exit 1; }
  echo "mesa-coop: the real cooperative-matrix tests on $(cat "$R/.ready")'s lavapipe"
  rc=0
  "$0" exec "$bin" --ignored real_coop || rc=1
  echo "mesa-coop: the default kernel choice with LUCENT_GPU_COOP=1 (its own process: the device is opened once)"
  LUCENT_GPU_COOP=1 "$0" exec "$bin" --ignored real_coop_default_choice || rc=1
  echo "mesa-coop: every shader variant through spirv-val $("$R/lucent-spirv-val" --version | head -1)"
  LUCENT_SPIRV_VAL="$R/lucent-spirv-val" cargo test --release -p lucent-gpu --test shaders every_shader_variant -- --nocapture || rc=1
  exit $rc
  ;;
*)
  sed -n '2,14p' "$0"; exit 2
  ;;
esac
