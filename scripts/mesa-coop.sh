#!/usr/bin/env bash
# The real cooperative-matrix convolution (native/gpu/src/ops/mma.rs) on a CPU: Mesa 26's lavapipe
# lists 8x8x8 f16 x f16 -> f32 cooperative matrices (VK_KHR_cooperative_matrix), Debian bookworm's
# Mesa 22.3 and bookworm-backports' 25.0 do not. Mesa 26 needs a newer C library than bookworm's,
# so it lives in a small Debian trixie root (trixie-backports' mesa-vulkan-drivers and trixie's
# spirv-tools 2025.1 with their dependencies, unpacked by `mmdebstrap --variant=extract`: no
# essential set, no maintainer scripts, about 340 MB and 10 s; git-ignored) and only the test
# process runs on that root's dynamic loader and libraries; nothing is installed on the host and
# no chroot or mount is needed to run.
#
#   bash scripts/mesa-coop.sh prepare          # once, as root (mmdebstrap): builds the root
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
  [ "$(id -u)" = 0 ] || { echo "mesa-coop: prepare needs root (mmdebstrap)"; exit 1; }
  command -v mmdebstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; } \
    || { echo "mesa-coop: cannot install mmdebstrap"; exit 1; }
  rm -rf "$R" && mkdir -p "$(dirname "$R")"
  # The packages and their dependencies (apt resolves them, backports preferred as with `apt-get -t`),
  # unpacked only: the test process needs their files, not a bootable system. (It was a debootstrap
  # minbase root plus apt-get in a chroot: 727 MB, about 52 s against 9 s here.)
  mmdebstrap --variant=extract --include=mesa-vulkan-drivers,libvulkan1,spirv-tools \
    --aptopt="APT::Default-Release \"$SUITE-backports\"" "$SUITE" "$R" \
    "deb http://deb.debian.org/debian $SUITE main" "deb http://deb.debian.org/debian $SUITE-backports main" >"$R.log" 2>&1 \
    || { tail -5 "$R.log"; echo "mesa-coop: mmdebstrap failed"; exit 1; }
  # merged /usr, as a booted trixie has it (extract runs no package's scripts): the paths below use /lib64
  for d in bin lib lib64 sbin; do [ -e "$R/$d" ] || ln -s "usr/$d" "$R/$d"; done
  [ -f "$R/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" ] && [ -x "$R/usr/bin/spirv-val" ] \
    || { echo "mesa-coop: the root lacks lavapipe or spirv-val"; exit 1; }
  # The ICD manifest with the driver's absolute path inside the root.
  printf '{"file_format_version":"1.0.1","ICD":{"api_version":"1.4.0","library_path":"%s"}}\n' \
    "$R/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" >"$R/lucent-lvp-icd.json"
  printf '#!/bin/sh\nexec "%s/lib64/ld-linux-x86-64.so.2" --library-path "%s" "%s/usr/bin/spirv-val" "$@"\n' "$R" "$LIB" "$R" >"$R/lucent-spirv-val"
  chmod +x "$R/lucent-spirv-val"
  # the version unpacked (no dpkg database in an extracted root): the package changelog's first line
  echo "mesa-vulkan-drivers $(zcat "$R/usr/share/doc/mesa-vulkan-drivers/changelog.Debian.gz" | sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p')" >"$R/.ready"
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
  # the workspace's feature set and the host triple named, as `npm test`'s `cargo test` builds it: its binaries
  # then serve here as they are (`-p lucent-gpu` alone unified other features and compiled 33 crates again)
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin=$(cargo test --release --workspace --target "$host" --test mma --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
  [ -x "$bin" ] || { echo "mesa-coop: could not build the mma test binary"; exit 1; }
  echo "mesa-coop: the real cooperative-matrix tests on $(cat "$R/.ready")'s lavapipe"
  rc=0
  "$0" exec "$bin" --ignored real_coop || rc=1
  echo "mesa-coop: the default kernel choice with LUCENT_GPU_COOP=1 (its own process: the device is opened once)"
  LUCENT_GPU_COOP=1 "$0" exec "$bin" --ignored real_coop_default_choice || rc=1
  echo "mesa-coop: every shader variant through spirv-val $("$R/lucent-spirv-val" --version | head -1)"
  LUCENT_SPIRV_VAL="$R/lucent-spirv-val" cargo test --release --workspace --target "$host" --test shaders every_shader_variant -- --nocapture || rc=1
  exit $rc
  ;;
*)
  sed -n '2,14p' "$0"; exit 2
  ;;
esac
