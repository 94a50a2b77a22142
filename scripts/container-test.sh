#!/usr/bin/env bash
# The container test (docs/deploy.md#the-container-test): builds the image from the top-level Dockerfile with podman,
# then runs it the way a scale-out deployment does, against real services on the host:
#   1. base images: when docker.io/library/debian:trixie-slim or docker.io/library/rust:1-trixie is not in podman's
#      store and no registry is reachable (CT_LOCAL_BASE=1, the default), they are made locally: mmdebstrap
#      trixie from the Debian mirror, plus (for the rust one) this host's Rust toolchain under /usr/local/rustup as in
#      the official image; the host's extra CA certificates (/usr/local/share/ca-certificates) go into both so that
#      an egress proxy's TLS works. The Dockerfile itself is unchanged: its FROM names are these tags.
#   2. `podman build --pull=never --network host` (timed), the image's size;
#   3. services: PostgreSQL and moto's S3 from scripts/services.sh (a fresh database and bucket of its own), a Redis of
#      its own (own port, AOF on), so nothing is shared with the test suites;
#   4. `lucent models fetch` in a container into a models volume (from LUCENT_MODEL_MIRROR, ../shared/models here);
#   5. `lucent keys create` in a container against PostgreSQL;
#   6. a worker container and a gateway container (--read-only, /tmp a tmpfs, DATA_DIR a volume, non-root,
#      --network host on distinct ports); a photo job and a video job through the gateway (inputs uploaded through
#      S3 pre-signed PUTs); the worker container restarted (SIGTERM, then a fresh container on the same volume) while
#      the video job runs; both jobs must end COMPLETED with a result that downloads.
# Not part of `npm test`/CI: the image build compiles the Rust workspace (tens of minutes on 2 cores).
#   scripts/container-test.sh              # everything
#   CT_SKIP_BUILD=1 scripts/container-test.sh    # reuse the built image
#   CT_CONTEXT=/path/to/a/clean/export scripts/container-test.sh   # build from another tree (e.g. git archive HEAD)
# Needs: podman (Debian: apt-get install podman runc mmdebstrap), redis-server, PostgreSQL (scripts/services.sh).
# Podman flags (CT_PODMAN_FLAGS, default `--runtime runc --storage-driver vfs`) and CONTAINERS_CONF
# (default: a file with no default ulimits and the cgroupfs manager) suit hosts where crun/overlay do not work.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${CT_DIR:-/tmp/lucent-container-test}
IMAGE=${CT_IMAGE:-localhost/lucent:test}
MIRROR=${LUCENT_MODEL_MIRROR:-$ROOT/../shared/models}
VIDEO=${CT_VIDEO:-$ROOT/../shared/data/video/onepiece_demo.mp4}
PHOTO=${CT_PHOTO:-}
GW_PORT=${CT_GATEWAY_PORT:-19080}
WK_PORT=${CT_WORKER_PORT:-19101}
GW_METRICS=${CT_GATEWAY_METRICS_PORT:-19090}
WK_METRICS=${CT_WORKER_METRICS_PORT:-19091}
READY_WAIT=${CT_READY_TIMEOUT:-900} # seconds a container may take to answer /readyz 200 (vfs: minutes)
REDIS_PORT=${CT_REDIS_PORT:-6397}
RUN_ID=ct$$
mkdir -p "$WORK"
if [ -z "${CONTAINERS_CONF:-}" ]; then
  printf '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n' > "$WORK/containers.conf"
  export CONTAINERS_CONF=$WORK/containers.conf
fi
read -r -a PODMAN_FLAGS <<< "${CT_PODMAN_FLAGS:---runtime runc --storage-driver vfs}"
pm() { podman "${PODMAN_FLAGS[@]}" "$@"; }

T0=$(date +%s)
declare -a TIMES=()
step() { echo "== $(date -u +%H:%M:%S) $*" >&2; }
took() { TIMES+=("$1: $(( $(date +%s) - $2 ))s"); echo "   $1 took $(( $(date +%s) - $2 ))s" >&2; }
fail() { echo "container-test: FAIL: $*" >&2; exit 1; }

# ---- 1. base images -------------------------------------------------------------------------------------------
extra_ca_hook=()
if compgen -G '/usr/local/share/ca-certificates/*.crt' > /dev/null; then
  extra_ca_hook=(--customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" && chroot "$1" update-ca-certificates')
fi
if [ "${CT_LOCAL_BASE:-1}" = 1 ]; then
  if ! pm image exists docker.io/library/debian:trixie-slim; then
    step "base image debian:trixie-slim (mmdebstrap)"; s=$(date +%s)
    mmdebstrap --variant=minbase --include=ca-certificates "${extra_ca_hook[@]}" trixie "$WORK/trixie.tar"
    pm import "$WORK/trixie.tar" docker.io/library/debian:trixie-slim
    rm -f "$WORK/trixie.tar"; took base-debian "$s"
  fi
  if ! pm image exists docker.io/library/rust:1-trixie; then
    step "base image rust:1-trixie (mmdebstrap + this host's toolchain)"; s=$(date +%s)
    sysroot=$(rustc --print sysroot)
    ver=$(rustc --version | awk '{print $2}')
    rm -rf "$WORK/rust-root"
    mmdebstrap --variant=minbase --include=ca-certificates,gcc,g++,libc6-dev,pkg-config,make,git,curl,python3 \
      "${extra_ca_hook[@]}" trixie "$WORK/rust-root"
    tc=$WORK/rust-root/usr/local/rustup/toolchains/$ver-x86_64-unknown-linux-gnu
    mkdir -p "$tc" "$WORK/rust-root/usr/local/cargo/bin"
    tar -C "$sysroot" --exclude=./share/doc -c . | tar -C "$tc" -x
    for b in cargo rustc rustdoc; do ln -s "/usr/local/rustup/toolchains/$ver-x86_64-unknown-linux-gnu/bin/$b" "$WORK/rust-root/usr/local/cargo/bin/$b"; done
    tar -C "$WORK/rust-root" -c . | pm import \
      --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV CARGO_HOME=/usr/local/cargo' --change 'ENV RUSTUP_HOME=/usr/local/rustup' \
      --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
      - docker.io/library/rust:1-trixie
    rm -rf "$WORK/rust-root"; took base-rust "$s"
  fi
fi

# ---- 2. the image -----------------------------------------------------------------------------------------------
if [ "${CT_SKIP_BUILD:-0}" != 1 ]; then
  step "podman build $IMAGE"; s=$(date +%s)
  nice -n 10 podman "${PODMAN_FLAGS[@]}" build --format docker --pull=never --network host -t "$IMAGE" "${CT_CONTEXT:-$ROOT}"
  took image-build "$s"
fi
size=$(pm image inspect --format '{{.Size}}' "$IMAGE")
echo "   image $IMAGE: $(( size / 1000000 )) MB" >&2
TIMES+=("image-size: $(( size / 1000000 )) MB")

# ---- 3. services --------------------------------------------------------------------------------------------------
step "services"
eval "$("$ROOT/scripts/services.sh")"
DB=lucent_$RUN_ID
PG_BASE=${LUCENT_DATABASE_URL%/*}
psql "$LUCENT_DATABASE_URL" -qc "CREATE DATABASE $DB" >/dev/null
export LUCENT_DATABASE_URL=$PG_BASE/$DB
export LUCENT_S3_BUCKET=lucent-$RUN_ID
curl -fsS -X PUT "$LUCENT_S3_ENDPOINT/$LUCENT_S3_BUCKET" >/dev/null # moto / s3rver: an unsigned CreateBucket
mkdir -p "$WORK/redis"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --dir "$WORK/redis" --appendonly yes \
  --maxmemory-policy noeviction --pidfile "$WORK/redis/redis.pid" --logfile "$WORK/redis/redis.log" >/dev/null
export LUCENT_REDIS_URL=redis://127.0.0.1:$REDIS_PORT
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

cleanup() {
  set +e
  pm rm -f -t 0 "lucent-$RUN_ID-gw" "lucent-$RUN_ID-wk" >/dev/null 2>&1
  pm volume rm -f "lucent-$RUN_ID-data-gw" "lucent-$RUN_ID-data-wk" >/dev/null 2>&1
  [ "${CT_KEEP_MODELS:-1}" = 1 ] || pm volume rm -f lucent-ct-models >/dev/null 2>&1
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
  rm -rf "$WORK/redis"
  psql "$PG_BASE/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT

# Every container sees the same settings (the environment of a deployment), on the host network.
ENVS=(-e LUCENT_DATABASE_URL -e LUCENT_REDIS_URL -e LUCENT_S3_ENDPOINT -e LUCENT_S3_BUCKET -e LUCENT_S3_REGION
      -e LUCENT_S3_ACCESS_KEY_ID -e LUCENT_S3_SECRET_ACCESS_KEY -e LUCENT_S3_FORCE_PATH_STYLE
      -e LUCENT_RATE_PER_SEC=1000 -e LUCENT_RATE_BURST=1000)
RO=(--read-only --tmpfs /tmp:rw,size=2g,mode=1777 --network host)

# ---- 4. models ------------------------------------------------------------------------------------------------------
step "lucent models fetch (init step) into volume lucent-ct-models"; s=$(date +%s)
pm volume exists lucent-ct-models || pm volume create lucent-ct-models >/dev/null
pm run --rm "${RO[@]}" -v lucent-ct-models:/models -v "$(readlink -f "$MIRROR")":/mirror:ro -e LUCENT_MODEL_MIRROR=/mirror \
  "$IMAGE" models fetch
took models-fetch "$s"

# ---- 5. an API key ---------------------------------------------------------------------------------------------------
step "lucent keys create (PostgreSQL)"
KEY=$(pm run --rm "${RO[@]}" "${ENVS[@]}" "$IMAGE" keys create --coins 100000 --rate 1000 | tail -n 1)
[ -n "$KEY" ] || fail "no key"

# ---- 6. worker + gateway ------------------------------------------------------------------------------------------
start_worker() {
  # CT_WORKER_DRAIN_MS: the worker's LUCENT_DRAIN_GRACE_MS (default: the setting's, 10 min, so the clip finishes in the
  # drain); a short one cuts the running job at the deadline, which must go back to the queue without using an attempt
  pm run -d --name "lucent-$RUN_ID-wk" "${RO[@]}" "${ENVS[@]}" -e PORT="$WK_PORT" -e LUCENT_METRICS_PORT="$WK_METRICS" -e LUCENT_WORKERS=1 \
    ${CT_WORKER_DRAIN_MS:+-e LUCENT_DRAIN_GRACE_MS=$CT_WORKER_DRAIN_MS} \
    -v "lucent-$RUN_ID-data-wk":/data -v lucent-ct-models:/models:ro --stop-timeout "${CT_STOP_TIMEOUT:-600}" \
    "$IMAGE" serve --role worker >/dev/null
}
# Waits for a container's /readyz to answer 200, printing its answer (and the detailed one on the metrics listener,
# LUCENT_METRICS_PORT, where the image has it) every CT_READY_PRINT_EVERY seconds; gives up after the given seconds
# or when the container has exited. On podman's vfs storage a container takes minutes to start (its root is a copy).
wait_ready() { # name port metrics-port seconds
  local end=$(( $(date +%s) + $4 )) last=0 out code body
  while [ "$(date +%s)" -lt "$end" ]; do
    out=$(curl -sS -m 5 -w '\n%{http_code}' "http://127.0.0.1:$2/readyz" 2>&1) || true
    code=${out##*$'\n'}; body=${out%$'\n'*}
    if [ "$code" = 200 ]; then echo "   $(date -u +%H:%M:%S) $1 /readyz 200: ${body:0:600}" >&2; return 0; fi
    if [ $(( $(date +%s) - last )) -ge "${CT_READY_PRINT_EVERY:-15}" ]; then
      last=$(date +%s)
      echo "   $(date -u +%H:%M:%S) $1 /readyz ${code}: ${body:0:600}" >&2
      out=$(curl -sS -m 5 "http://127.0.0.1:$3/readyz" 2>/dev/null) && echo "     detailed (:$3): ${out:0:600}" >&2
    fi
    [ "$(pm inspect --format '{{.State.Running}}' "lucent-$RUN_ID-$1" 2>/dev/null)" = true ] || { echo "   $1 container is not running" >&2; return 1; }
    sleep 2
  done
  return 1
}
step "worker + gateway containers"; s=$(date +%s)
start_worker
pm run -d --name "lucent-$RUN_ID-gw" "${RO[@]}" "${ENVS[@]}" -e PORT="$GW_PORT" -e LUCENT_METRICS_PORT="$GW_METRICS" -e LUCENT_PUBLIC_URL="http://127.0.0.1:$GW_PORT" \
  -v "lucent-$RUN_ID-data-gw":/data -v lucent-ct-models:/models:ro "$IMAGE" serve --role gateway >/dev/null
wait_ready wk "$WK_PORT" "$WK_METRICS" "$READY_WAIT" || { pm logs --tail 30 "lucent-$RUN_ID-wk"; fail "worker not ready"; }
wait_ready gw "$GW_PORT" "$GW_METRICS" "$READY_WAIT" || { pm logs --tail 30 "lucent-$RUN_ID-gw"; pm logs --tail 30 "lucent-$RUN_ID-wk"; fail "gateway not ready"; }
took containers-ready "$s"
user=$(pm exec "lucent-$RUN_ID-gw" id -u); [ "$user" = 10001 ] || fail "runs as uid $user"
health=$(pm healthcheck run "lucent-$RUN_ID-gw" >/dev/null 2>&1 && echo healthy || echo unhealthy)
echo "   gateway runs as uid $user; HEALTHCHECK: $health" >&2
[ "$health" = healthy ] || [ "${CT_REQUIRE_HEALTHCHECK:-1}" = 0 ] || fail "HEALTHCHECK fails (an image built in OCI format drops it: podman build --format docker)"

api() { # path json
  curl -fsS -X POST "http://127.0.0.1:$GW_PORT$1" -H "apikey: $KEY" -H 'content-type: application/json' -d "$2"
}
upload() { # file content-type -> access_url
  local ps up acc
  ps=$(api /api/oss/presign-put "{\"filename\":\"$(basename "$1")\",\"content_type\":\"$2\"}")
  up=$(node -e 'const d=JSON.parse(process.argv[1]).data;console.log(d.upload_url)' "$ps")
  acc=$(node -e 'const d=JSON.parse(process.argv[1]).data;console.log(d.access_url)' "$ps")
  curl -fsS -X PUT -H "content-type: $2" --data-binary @"$1" "$up" >/dev/null
  echo "$acc"
}
job_id() { node -e 'const r=JSON.parse(process.argv[1]);if(r.code!==200){console.error(process.argv[1]);process.exit(1)};console.log(r.data.job_id)' "$1"; }
status() { api /api/task-status "{\"job_id\":\"$1\"}"; }
field() { node -e 'const d=JSON.parse(process.argv[1]).data;console.log(d[process.argv[2]] ?? "")' "$1" "$2"; }
wait_done() { # job seconds -> prints final status json
  local st
  for _ in $(seq "$2"); do
    st=$(status "$1")
    case "$(field "$st" status)" in COMPLETED|ERROR) echo "$st"; return 0;; esac
    sleep 1
  done
  echo "$st"
}

if [ -z "$PHOTO" ]; then PHOTO=$WORK/in.png; ffmpeg -v error -y -f lavfi -i testsrc=size=320x240 -frames:v 1 "$PHOTO"; fi
step "photo job"; s=$(date +%s)
P_URL=$(upload "$PHOTO" image/png)
P_JOB=$(job_id "$(api /api/photo-enhancer "{\"model_name\":\"general_2x\",\"img_url\":\"$P_URL\",\"extension\":\".png\"}")")
P_ST=$(wait_done "$P_JOB" 300)
[ "$(field "$P_ST" status)" = COMPLETED ] || fail "photo job: $P_ST"
curl -fsS -o "$WORK/photo-out" "$(field "$P_ST" res_url)"
dims=$(ffprobe -v error -show_entries stream=width,height -of csv=p=0 "$WORK/photo-out")
echo "   photo job $P_JOB COMPLETED, result ${dims}" >&2
[ "$dims" = "640,480" ] || fail "photo result is $dims, not 640,480"
took photo-job "$s"

step "video job, worker restarted mid-job"; s=$(date +%s)
V_URL=$(upload "$VIDEO" video/mp4)
IFS=x read -r VW VH < <(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0:s=x "$VIDEO")
[ -n "$VW" ] && [ -n "$VH" ] || fail "cannot read the size of $VIDEO"
V_JOB=$(job_id "$(api /api/video-enhancer "{\"model_name\":\"${CT_VIDEO_MODEL:-general_restore_1x}\",\"video_url\":\"$V_URL\",\"resolution\":[$VW,$VH]}")")
# wait until the worker has made progress on it (progress >= CT_RESTART_AT_PROGRESS %), then restart the worker container (podman stop = SIGTERM,
# the stop timeout as grace) and start a fresh one on the same data volume
for _ in $(seq 300); do
  st=$(status "$V_JOB"); [ "$(field "$st" status)" = CONVERTING ] || break
  [ "$(field "$st" progress)" -ge "${CT_RESTART_AT_PROGRESS:-1}" ] 2>/dev/null && break # the worker has made progress
  pm logs "lucent-$RUN_ID-wk" 2>&1 | grep -q "$V_JOB" && break
  sleep 1
done
sleep "${CT_RESTART_AFTER:-5}"
[ "$(field "$(status "$V_JOB")" status)" = CONVERTING ] || fail "video job ended before the restart (use a longer video: CT_VIDEO)"
r=$(date +%s)
pm stop -t "${CT_STOP_TIMEOUT:-600}" "lucent-$RUN_ID-wk" >/dev/null
at_stop=$(field "$(status "$V_JOB")" status)
echo "   worker stopped (SIGTERM) in $(( $(date +%s) - r ))s; job then: $at_stop" >&2
took worker-stop "$r"
pm logs --tail 15 "lucent-$RUN_ID-wk" > "$WORK/worker-1.log" 2>&1 || true
grep -h '"msg":"drain' "$WORK/worker-1.log" | sed 's/^/   stopped worker: /' >&2 || true
pm rm "lucent-$RUN_ID-wk" >/dev/null
r=$(date +%s)
start_worker
wait_ready wk "$WK_PORT" "$WK_METRICS" "$READY_WAIT" || { pm logs --tail 30 "lucent-$RUN_ID-wk"; fail "restarted worker not ready"; }
took worker-restart-ready "$r"
V_ST=$(wait_done "$V_JOB" "${CT_VIDEO_TIMEOUT:-1800}")
[ "$(field "$V_ST" status)" = COMPLETED ] || { pm logs --tail 40 "lucent-$RUN_ID-wk"; fail "video job: $V_ST"; }
curl -fsS -o "$WORK/video-out.mp4" "$(field "$V_ST" res_url)"
frames=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$WORK/video-out.mp4")
att=$(psql "$LUCENT_DATABASE_URL" -Atc "SELECT attempts FROM jobs WHERE id = '$V_JOB'" 2>/dev/null || echo '?')
when=$([ "$at_stop" = COMPLETED ] && echo "within the stopped worker's drain" || echo "by the fresh worker, after the restart")
echo "   video job $V_JOB COMPLETED $when: $frames frames, attempts $att" >&2
TIMES+=("video-job-attempts: $att")
[ "${frames:-0}" -gt 0 ] || fail "video result has no frames"
# the drain's promise: a job finished within the grace, or handed back at the deadline, uses no attempt
[ "$att" = 1 ] || [ "${CT_REQUIRE_ONE_ATTEMPT:-1}" = 0 ] || fail "the worker restart used an attempt (attempts $att)"
took video-job "$s"

echo "container-test: PASS ($(( $(date +%s) - T0 ))s)" >&2
printf '  %s\n' "${TIMES[@]}" >&2
