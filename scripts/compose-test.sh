#!/usr/bin/env bash
# The compose test (docs/deploy.md#the-compose-test): runs compose.yaml itself (2 gateways, 2 workers, Redis,
# PostgreSQL, S3, the one-shot `models` and `bucket` services) with podman-compose on compose's own bridge network,
# then sends a photo job through gateway-1 and checks that gateway-2 sees the same job (status, result link) and that
# both workers registered in the shared queue.
#
# Where no container registry is reachable (here), the three third-party images compose.yaml names (postgres:16,
# redis:7, minio/minio + minio/mc) cannot be pulled: CS_STANDINS=1 (the default) builds ONE local stand-in image from
# docker.io/library/debian:trixie-slim (Debian's PostgreSQL and Redis, moto's S3 server from PyPI, a 3-command `mc`)
# and an override file that swaps only those four `image:` lines. Everything else, the Lucent services above all, runs
# as compose.yaml says (read-only root, tmpfs, volumes, environment, ports, depends_on, stop_grace_period). With a
# registry, CS_STANDINS=0 runs compose.yaml as is.
# Not part of `npm test`/CI: it needs the image (scripts/container-test.sh builds it; CS_IMAGE names it).
#   python3 -m venv /tmp/pc && /tmp/pc/bin/pip install podman-compose      # podman 4.3 has no `podman compose`
#   CS_IMAGE=localhost/lucent:test scripts/compose-test.sh
# Knobs (script-local): CS_IMAGE, CS_COMPOSE (the podman-compose command), CS_PROJECT, CS_DIR, CS_STANDINS,
# CS_GATEWAY_1_PORT / CS_GATEWAY_2_PORT / CS_S3_PORT (host ports), CS_READY_TIMEOUT, CS_KEEP=1 (leave it running),
# CT_PODMAN_FLAGS and CONTAINERS_CONF as in container-test.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${CS_DIR:-/tmp/lucent-compose-test}
PROJ=${CS_PROJECT:-lucentct}
COMPOSE=${CS_COMPOSE:-$(command -v podman-compose || echo /tmp/pc/bin/podman-compose)}
STANDIN=localhost/lucent-compose-standin:trixie
GW1=${CS_GATEWAY_1_PORT:-19480}
GW2=${CS_GATEWAY_2_PORT:-19481}
S3P=${CS_S3_PORT:-19400}
READY_WAIT=${CS_READY_TIMEOUT:-900}
mkdir -p "$WORK"
if [ -z "${CONTAINERS_CONF:-}" ]; then
  printf '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n' > "$WORK/containers.conf"
  export CONTAINERS_CONF=$WORK/containers.conf
fi
read -r -a PODMAN_FLAGS <<< "${CT_PODMAN_FLAGS:---runtime runc --storage-driver vfs}"
# podman-compose calls `podman`: a wrapper adds the flags this host needs (and a nice level: the containers inherit it)
printf '#!/bin/sh\nexec nice -n %s podman %s "$@"\n' "${CS_NICE:-10}" "${PODMAN_FLAGS[*]}" > "$WORK/podman"
chmod +x "$WORK/podman"
pm() { "$WORK/podman" "$@"; }
T0=$(date +%s)
declare -a TIMES=()
step() { echo "== $(date -u +%H:%M:%S) (+$(( $(date +%s) - T0 ))s) $*" >&2; }
took() { TIMES+=("$1: $(( $(date +%s) - $2 ))s"); echo "   $1 took $(( $(date +%s) - $2 ))s" >&2; }
fail() { echo "compose-test: FAIL: $*" >&2; exit 1; }
trap 'echo "compose-test: FAIL at line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR
[ -x "$COMPOSE" ] || fail "no podman-compose (python3 -m venv /tmp/pc && /tmp/pc/bin/pip install podman-compose; CS_COMPOSE=...)"

export LUCENT_IMAGE=${CS_IMAGE:-localhost/lucent:test}
pm image exists "$LUCENT_IMAGE" || fail "no image $LUCENT_IMAGE (scripts/container-test.sh builds it)"
export LUCENT_GATEWAY_1_PORT=$GW1 LUCENT_GATEWAY_2_PORT=$GW2 S3_PORT=$S3P
export LUCENT_PUBLIC_URL_1=http://127.0.0.1:$GW1 LUCENT_PUBLIC_URL_2=http://127.0.0.1:$GW2
export LUCENT_S3_PUBLIC_ENDPOINT=http://127.0.0.1:$S3P
export LUCENT_MODEL_MIRROR_DIR=${LUCENT_MODEL_MIRROR_DIR:-$(readlink -f "$ROOT/../shared/models")}
FILES=(-f "$ROOT/compose.yaml")

# ---- the stand-ins for postgres, redis, minio, mc -------------------------------------------------------------------
if [ "${CS_STANDINS:-1}" = 1 ]; then
  if ! pm image exists "$STANDIN"; then
    step "stand-in image $STANDIN (Debian PostgreSQL + Redis, moto S3)"; s=$(date +%s)
    mkdir -p "$WORK/standin"
    cat > "$WORK/standin/Containerfile" <<'EOF'
FROM docker.io/library/debian:trixie-slim
RUN apt-get update && apt-get install -y --no-install-recommends postgresql redis-server curl python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/moto && /opt/moto/bin/pip install --no-cache-dir 'moto[server]' \
 && mkdir -p /data && chmod 777 /data
COPY standin /usr/local/bin/standin
COPY mc /usr/local/bin/mc
WORKDIR /data
ENTRYPOINT ["/usr/local/bin/standin"]
EOF
    cat > "$WORK/standin/standin" <<'EOF'
#!/bin/sh
# Stand-in for docker.io/library/postgres:16, redis:7 and minio/minio (compose-test.sh): dispatches on its arguments.
set -e
case "${1:-}" in
  redis-server) shift; cd /data; exec redis-server --protected-mode no --dir /data "$@" ;;
  server) exec /opt/moto/bin/moto_server -H 0.0.0.0 -p 9000 ;;   # minio's `server /data ...`
  "" ) # postgres: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB as the official image
    bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
    PGDATA=${PGDATA:-/var/lib/postgresql/data}
    mkdir -p "$PGDATA" /run/postgresql && chown -R postgres: "$PGDATA" /run/postgresql && chmod 700 "$PGDATA"
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
      printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pw && chown postgres /tmp/pw
      runuser -u postgres -- "$bin/initdb" -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile=/tmp/pw --auth-local=trust --auth-host=scram-sha-256 >/dev/null
      rm -f /tmp/pw
      echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
      runuser -u postgres -- "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
      db=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
      [ "$db" = postgres ] || runuser -u postgres -- "$bin/createdb" -U "${POSTGRES_USER:-postgres}" "$db"
      runuser -u postgres -- "$bin/pg_ctl" -D "$PGDATA" -w stop >/dev/null
    fi
    exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' ;;
  *) exec "$@" ;;
esac
EOF
    cat > "$WORK/standin/mc" <<'EOF'
#!/bin/sh
# Stand-in for minio's `mc` (compose-test.sh): `alias set NAME URL ...`, `mb [--ignore-existing] NAME/BUCKET`, `ready local`.
set -e
case "$1 $2" in
  "alias set") echo "$4" > "/tmp/mc-alias-$3"; echo "alias $3 -> $4" ;;
  "ready local") curl -fsS -o /dev/null http://127.0.0.1:9000/ ;;
  mb*) shift; [ "$1" = --ignore-existing ] && shift; t=$1; url=$(cat "/tmp/mc-alias-${t%%/*}"); curl -fsS -X PUT "$url/${t#*/}" >/dev/null; echo "bucket ${t#*/} ready" ;;
  *) echo "mc stand-in: unsupported: $*" >&2; exit 2 ;;
esac
EOF
    chmod +x "$WORK/standin/standin" "$WORK/standin/mc"
    nice -n 10 "$WORK/podman" build --pull=never --network host -t "$STANDIN" "$WORK/standin"
    took standin-image "$s"
  fi
  cat > "$WORK/standins.yaml" <<EOF
# compose-test.sh: no registry here; the third-party images become one local stand-in (see the script).
services:
  postgres: { image: $STANDIN }
  redis: { image: $STANDIN }
  s3: { image: $STANDIN }
  bucket: { image: $STANDIN }
EOF
  FILES+=(-f "$WORK/standins.yaml")
fi
pc() { "$COMPOSE" --podman-path "$WORK/podman" --in-pod false -p "$PROJ" "${FILES[@]}" "$@"; }
cname() { echo "${PROJ}_$1_1"; }

cleanup() {
  set +e
  [ "${CS_KEEP:-0}" = 1 ] && { echo "   CS_KEEP=1: left running (project $PROJ)" >&2; return; }
  step "compose down"
  pc down -v -t 30 >/dev/null 2>&1
}
trap cleanup EXIT

# compose.yaml's depends_on (service_healthy, service_completed_successfully) cannot be enforced by podman 4.3:
# podman-compose skips `healthy` conditions before podman 4.6, podman runs HEALTHCHECKs through systemd timers (none
# in this container host), and the `--requires` chains podman-compose adds fail to start here ("depends on container
# ... not found in input list"). So `up --no-deps` in the order depends_on gives, waiting as the conditions would:
# the three services answer, then the two one-shots exit 0, then gateways and workers.
up() { pc up -d --no-deps "$@" >"$WORK/up.log" 2>&1 || { grep -v 'systemd connection' "$WORK/up.log" >&2; fail "compose up $*"; }; }
step "compose up ($LUCENT_IMAGE; gateways on :$GW1 :$GW2, S3 on :$S3P)"; s=$(date +%s)
pc down -v -t 5 >/dev/null 2>&1 || true
up postgres redis s3
healthy() { # service: run the service's own healthcheck command (compose.yaml's `test`) in its container
  case "$1" in
    postgres) pm exec "$(cname postgres)" pg_isready -U lucent -d lucent ;;
    redis) pm exec "$(cname redis)" redis-cli ping ;;
    s3) pm exec "$(cname s3)" mc ready local ;;
  esac >/dev/null 2>&1
}
for svc in postgres redis s3; do
  end=$(( $(date +%s) + ${CS_SERVICE_TIMEOUT:-300} )) # initdb on vfs at nice 10 beside other work: minutes
  until healthy "$svc"; do
    [ "$(date +%s)" -lt "$end" ] || { pm ps -a --format '{{.Names}} {{.Status}}' >&2; pm logs --tail 20 "$(cname "$svc")" >&2; fail "$svc not healthy"; }
    sleep 2
  done
done
took services-healthy "$s"
s=$(date +%s)
up bucket models
for svc in bucket models; do
  rc=$(pm wait "$(cname "$svc")" 2>/dev/null || echo '?')
  [ "$rc" = 0 ] || { pm logs --tail 20 "$(cname "$svc")" >&2; fail "$svc service exited $rc"; }
done
echo "   bucket: $(pm logs "$(cname bucket)" 2>&1 | tail -n 1); models: $(pm logs "$(cname models)" 2>&1 | tail -n 1)" >&2
took one-shots "$s"
s=$(date +%s)
up gateway-1 gateway-2 worker-1 worker-2
took compose-up "$s"
pm ps -a --filter "label=io.podman.compose.project=$PROJ" --format '{{.Names}} {{.Status}}' >&2

step "gateways ready"; s=$(date +%s)
for port in "$GW1" "$GW2"; do
  end=$(( $(date +%s) + READY_WAIT )) last=0
  until curl -fsS -m 5 -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then
      for c in gateway-1 gateway-2 worker-1 worker-2; do echo "--- $c" >&2; pm logs --tail 15 "$(cname $c)" >&2; done
      fail "gateway on :$port not ready"
    fi
    if [ $(( $(date +%s) - last )) -ge 30 ]; then last=$(date +%s); echo "   $(date -u +%H:%M:%S) :$port /readyz $(curl -sS -m 5 "http://127.0.0.1:$port/readyz" 2>&1 | head -c 300)" >&2; fi
    sleep 2
  done
done
took gateways-ready "$s"
# the detailed readiness is on the metrics listener (LUCENT_METRICS_PORT 9464, not published): ask from inside
detail() { pm exec "$(cname "$1")" node -e 'fetch("http://127.0.0.1:9464/readyz").then(r=>r.text()).then(t=>console.log(t),()=>fetch("http://127.0.0.1:8080/readyz").then(r=>r.text()).then(t=>console.log(t)))'; }
for c in gateway-1 gateway-2; do echo "   $c readiness: $(detail "$c" | head -c 600)" >&2; done
for c in gateway-1 gateway-2 worker-1 worker-2; do
  echo "   $c: uid $(pm exec "$(cname $c)" id -u), $(pm exec "$(cname $c)" sh -c 'touch /app/x 2>/dev/null && echo WRITABLE root || echo read-only root')" >&2
done

step "API key (lucent keys create inside gateway-1, PostgreSQL)"
out=$(pm exec "$(cname gateway-1)" node /app/bin/lucent.js keys create --coins 100000 --rate 1000 2>&1) || fail "keys create: $out"
KEY=$(tail -n 1 <<< "$out")
[ -n "$KEY" ] || fail "no key"

api() { curl -fsS -X POST "http://127.0.0.1:$1$2" -H "apikey: $KEY" -H 'content-type: application/json' -d "$3"; }
field() { node -e 'const d=JSON.parse(process.argv[1]).data;console.log(d[process.argv[2]] ?? "")' "$1" "$2"; }
step "photo job through gateway-1, followed on gateway-2"; s=$(date +%s)
PHOTO=$WORK/in.png
ffmpeg -v error -y -f lavfi -i testsrc=size=320x240 -frames:v 1 "$PHOTO"
ps=$(api "$GW1" /api/oss/presign-put '{"filename":"in.png","content_type":"image/png"}')
curl -fsS -X PUT -H 'content-type: image/png' --data-binary @"$PHOTO" "$(field "$ps" upload_url)" >/dev/null
r=$(api "$GW1" /api/photo-enhancer "{\"model_name\":\"general_2x\",\"img_url\":\"$(field "$ps" access_url)\",\"extension\":\".png\"}")
JOB=$(field "$r" job_id)
[ -n "$JOB" ] || fail "submission: $r"
st=''
for _ in $(seq 600); do
  st=$(api "$GW2" /api/task-status "{\"job_id\":\"$JOB\"}")
  case "$(field "$st" status)" in COMPLETED|ERROR) break;; esac
  sleep 1
done
[ "$(field "$st" status)" = COMPLETED ] || fail "photo job seen from gateway-2: $st"
st1=$(api "$GW1" /api/task-status "{\"job_id\":\"$JOB\"}")
[ "$(field "$st1" status)" = COMPLETED ] || fail "photo job seen from gateway-1: $st1"
curl -fsS -o "$WORK/out" "$(field "$st" res_url)"
dims=$(ffprobe -v error -show_entries stream=width,height -of csv=p=0 "$WORK/out")
[ "$dims" = "640,480" ] || fail "photo result is $dims, not 640,480"
ran=$(for c in worker-1 worker-2; do if pm logs "$(cname $c)" 2>&1 | grep -q "$JOB"; then echo -n "$c "; fi; done)
echo "   job $JOB submitted on gateway-1, COMPLETED as seen by gateway-2 and gateway-1, result $dims; run by: ${ran:-?}" >&2
took photo-job "$s"

echo "compose-test: PASS ($(( $(date +%s) - T0 ))s)" >&2
printf '  %s\n' "${TIMES[@]}" >&2
