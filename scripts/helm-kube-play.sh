#!/usr/bin/env bash
# The Helm chart's pods run for real (docs/deploy.md#kubernetes-helm): `helm template` renders deploy/helm/lucent with
# one gateway and one worker pointed at real services on this host, and `podman kube play` runs the rendered
# ConfigMap, Secret and both Deployments (the worker's models-fetch init container included) from the image the
# top-level Dockerfile builds (scripts/container-test.sh builds it as localhost/lucent:test). Then: the gateway turns
# ready (it sees the worker), the pods run as uid 10001 on a read-only root, an API key is made inside the gateway
# pod, a photo job goes through the gateway to the worker and its result downloads from S3.
#   1. services: PostgreSQL and moto's S3 from scripts/services.sh (a database and bucket of its own), a Redis of its
#      own (AOF, noeviction), as container-test.sh does;
#   2. `helm template` with a values file written here (image pullPolicy Never, host network ports, the models mirror
#      ../shared/models as a hostPath, the models volume a claim that podman makes a named volume);
#   3. `podman kube play --network host` of the ConfigMap, Secret and Deployments (podman 4.3 has no Service, PDB,
#      HPA or ScaledObject: those are checked offline by test/deploy/helm.ts); `podman kube down` at the end.
# Not part of `npm test`/CI (needs the built image).
#   HELM=/path/to/helm scripts/helm-kube-play.sh
#   KP_IMAGE=localhost/lucent KP_TAG=test   # the image (default: container-test.sh's)
# Podman flags as container-test.sh: CT_PODMAN_FLAGS (default `--runtime runc --storage-driver vfs`) and a
# CONTAINERS_CONF with no default ulimits and the cgroupfs manager.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${KP_DIR:-/tmp/lucent-kube-play}
REPO=${KP_IMAGE:-localhost/lucent}
TAG=${KP_TAG:-test}
MIRROR=$(readlink -f "${LUCENT_MODEL_MIRROR:-$ROOT/../shared/models}")
GW_PORT=${KP_GATEWAY_PORT:-19280}
WK_PORT=${KP_WORKER_PORT:-19290}
REDIS_PORT=${KP_REDIS_PORT:-6396}
HELM=${HELM:-$(command -v helm || echo "$HOME/go/bin/helm")}
RUN_ID=kp$$
REL=lucent-kp
mkdir -p "$WORK"
cd "$ROOT"   # node resolves the yaml package from here
if [ -z "${CONTAINERS_CONF:-}" ]; then
  printf '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n' > "$WORK/containers.conf"
  export CONTAINERS_CONF=$WORK/containers.conf
fi
read -r -a PODMAN_FLAGS <<< "${CT_PODMAN_FLAGS:---runtime runc --storage-driver vfs}"
pm() { podman "${PODMAN_FLAGS[@]}" "$@"; }
T0=$(date +%s)
step() { echo "== $(date -u +%H:%M:%S) (+$(( $(date +%s) - T0 ))s) $*" >&2; }
fail() { echo "helm-kube-play: FAIL: $*" >&2; exit 1; }

[ -x "$HELM" ] || fail "no helm binary (HELM=...; go install helm.sh/helm/v3/cmd/helm@v3.22.0)"
pm image exists "$REPO:$TAG" || fail "no image $REPO:$TAG (scripts/container-test.sh builds it)"

step "services"
eval "$("$ROOT/scripts/services.sh")"
DB=lucent_$RUN_ID
PG_BASE=${LUCENT_DATABASE_URL%/*}
psql "$LUCENT_DATABASE_URL" -qc "CREATE DATABASE $DB" >/dev/null
BUCKET=lucent-$RUN_ID
curl -fsS -o /dev/null -m 5 -X PUT "$LUCENT_S3_ENDPOINT/$BUCKET" || fail "could not create bucket $BUCKET"
mkdir -p "$WORK/redis"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --dir "$WORK/redis" --appendonly yes \
  --maxmemory-policy noeviction --pidfile "$WORK/redis/redis.pid" --logfile "$WORK/redis/redis.log" >/dev/null
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

cleanup() {
  set +e
  [ -f "$WORK/pods.yaml" ] && pm kube down "$WORK/pods.yaml" >/dev/null 2>&1
  [ "${KP_KEEP_MODELS:-1}" = 1 ] || pm volume rm -f lucent-kp-models >/dev/null 2>&1
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
  rm -rf "$WORK/redis"
  psql "$PG_BASE/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT

step "helm template"
cat > "$WORK/values.yaml" <<EOF
image: {repository: $REPO, tag: $TAG, pullPolicy: Never}
gateway: {replicas: 1, containerPort: $GW_PORT, preStopSleepSeconds: 0}
worker: {replicas: 1, containerPort: $WK_PORT, drainGraceSeconds: 120}
metrics: {port: 0}
models:
  existingClaim: lucent-kp-models
  mirror: {hostPath: "$MIRROR"}
config:
  LUCENT_PUBLIC_URL: http://127.0.0.1:$GW_PORT
  LUCENT_S3_ENDPOINT: $LUCENT_S3_ENDPOINT
  LUCENT_S3_BUCKET: $BUCKET
  LUCENT_S3_REGION: ${LUCENT_S3_REGION:-us-east-1}
  LUCENT_S3_FORCE_PATH_STYLE: "1"
  LUCENT_RATE_PER_SEC: "1000"
  LUCENT_RATE_BURST: "1000"
secrets:
  LUCENT_DATABASE_URL: $PG_BASE/$DB
  LUCENT_REDIS_URL: redis://127.0.0.1:$REDIS_PORT
  LUCENT_S3_ACCESS_KEY_ID: ${LUCENT_S3_ACCESS_KEY_ID:-test}
  LUCENT_S3_SECRET_ACCESS_KEY: ${LUCENT_S3_SECRET_ACCESS_KEY:-test}
EOF
"$HELM" template "$REL" "$ROOT/deploy/helm/lucent" --kube-version 1.31.0 -f "$WORK/values.yaml" > "$WORK/rendered.yaml"
# What podman 4.3.1 (Debian 12) cannot play as rendered, adapted here and nowhere else:
#  - kinds: only the ConfigMap and the Deployments are played (no Service, PDB, ServiceAccount in podman; they are
#    validated offline by test/deploy/helm.ts);
#  - the Secret: kube play stores a Secret in a form its own envFrom cannot read back (containers/podman#17071:
#    "secret ... is not valid JSON"), so its keys are passed as env of the containers that name it;
#  - ports and probes: with --network host podman refuses port mappings, and its probes exec curl inside the image;
#    the ports are dropped, and this script polls /readyz as the readiness probe would;
#  - init containers: kube play does not wait for them to exit here ("failed to remove once init container ... as
#    it is running"), so each one runs first with `podman run`, with the rendered args, env, user, read-only root
#    and volumes, and the Deployment is played without it.
node --input-type=module - "$WORK/rendered.yaml" "$WORK/pods.yaml" "$WORK/init" <<'JS'
import { parseAllDocuments, stringify } from 'yaml'
import fs from 'node:fs'
const [src, out, initDir] = process.argv.slice(2)
const docs = parseAllDocuments(fs.readFileSync(src, 'utf8')).map((d) => d.toJS()).filter(Boolean)
const secret = docs.find((o) => o.kind === 'Secret')
const secretEnv = Object.entries({
  ...Object.fromEntries(Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()])),
  ...(secret?.stringData ?? {}),
})
const cm = docs.find((o) => o.kind === 'ConfigMap')
const keep = docs.filter((o) => ['ConfigMap', 'Deployment'].includes(o.kind))
fs.mkdirSync(initDir, { recursive: true })
let n = 0
for (const d of keep.filter((o) => o.kind === 'Deployment')) {
  const pod = d.spec.template.spec
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    delete c.ports; delete c.startupProbe; delete c.livenessProbe; delete c.readinessProbe
    if (c.envFrom?.some((e) => e.secretRef)) {
      c.envFrom = c.envFrom.filter((e) => !e.secretRef)
      c.env = [...secretEnv.map(([name, value]) => ({ name, value: String(value) })), ...(c.env ?? [])]
    }
  }
  for (const c of pod.initContainers ?? []) {
    // podman run arguments, NUL-separated
    const a = ['--rm', '--network', 'host', '--user', `${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`]
    if (c.securityContext?.readOnlyRootFilesystem) a.push('--read-only')
    for (const e of c.envFrom ?? []) if (e.configMapRef?.name === cm?.metadata.name) for (const [k, v] of Object.entries(cm.data ?? {})) a.push('-e', `${k}=${v}`)
    for (const e of c.env ?? []) a.push('-e', `${e.name}=${e.value}`)
    for (const m of c.volumeMounts ?? []) {
      const v = pod.volumes.find((x) => x.name === m.name)
      const ro = m.readOnly ? ':ro' : ''
      if (v.persistentVolumeClaim) a.push('-v', `${v.persistentVolumeClaim.claimName}:${m.mountPath}${ro}`)
      else if (v.hostPath) a.push('-v', `${v.hostPath.path}:${m.mountPath}${ro}`)
      else if (v.emptyDir) a.push('--tmpfs', `${m.mountPath}:rw,mode=1777`)
    }
    a.push(c.image, ...(c.args ?? []))
    fs.writeFileSync(`${initDir}/${++n}-${d.metadata.name}-${c.name}`, a.join('\0'))
  }
  delete pod.initContainers
}
fs.writeFileSync(out, keep.map((o) => stringify(o)).join('---\n'))
console.error(`   rendered: ${docs.map((o) => o.kind).join(', ')}; playing: ${keep.map((o) => o.kind).join(', ')}; init containers: ${n}`)
JS

for f in "$WORK"/init/*; do
  [ -f "$f" ] || continue
  step "init container $(basename "$f") (podman run)"
  s=$(date +%s)
  readarray -d '' -t ARGS < "$f"
  pm run "${ARGS[@]}" >&2 || fail "init container $(basename "$f") failed"
  echo "   took $(( $(date +%s) - s ))s" >&2
  rm -f "$f"
done

step "podman kube play"
s=$(date +%s)
pm kube play --network host "$WORK/pods.yaml" >&2
ctr() { pm ps -a --format '{{.Names}}' | grep -E -- "$1" | head -n 1; }
GW=$(ctr "^$REL-gateway-pod-[0-9]+-gateway$"); WK=$(ctr "^$REL-worker-pod-[0-9]+-worker$")
[ -n "$GW" ] && [ -n "$WK" ] || { pm ps -a >&2; fail "the gateway or worker container is missing"; }
ready=0
for _ in $(seq 300); do curl -fsS -o /dev/null "http://127.0.0.1:$GW_PORT/readyz" 2>/dev/null && { ready=1; break; }; sleep 1; done
if [ "$ready" != 1 ]; then
  pm ps -a >&2; for c in $(pm ps -a --format '{{.Names}}' | grep "^$REL"); do echo "--- $c" >&2; pm logs --tail 20 "$c" >&2; done
  fail "gateway not ready"
fi
echo "   gateway ready after $(( $(date +%s) - s ))s (worker seen: $(curl -fsS "http://127.0.0.1:$WK_PORT/healthz" >/dev/null && echo yes))" >&2
# counted inside the worker (it mounts the volume): a `podman run` of its own would copy the image again on vfs
nmodels=$(pm exec "$WK" sh -c 'find /models -type f | wc -l' 2>/dev/null) || nmodels='?'
echo "   models volume (lucent-kp-models) as the worker sees it: $nmodels files" >&2

for c in "$GW" "$WK"; do
  uid=$(pm exec "$c" id -u) || fail "podman exec into $c failed"
  [ "$uid" = 10001 ] || fail "$c runs as uid $uid"
  if pm exec "$c" sh -c 'touch /app/x' 2>/dev/null; then fail "$c: root filesystem is writable"; fi
  pm exec "$c" sh -c 'touch /data/x /tmp/x' || fail "$c: /data or /tmp not writable"
  echo "   $c: uid $uid, read-only root, /data and /tmp writable, role $(pm exec "$c" printenv LUCENT_ROLE), drain $(pm exec "$c" printenv LUCENT_DRAIN_GRACE_MS) ms" >&2
done

step "API key inside the gateway pod"
KEY=$(pm exec "$GW" node /app/bin/lucent.js keys create --coins 100000 --rate 1000 | tail -n 1) || fail "keys create in $GW failed"
[ -n "$KEY" ] || fail "no key"

api() { curl -fsS -X POST "http://127.0.0.1:$GW_PORT$1" -H "apikey: $KEY" -H 'content-type: application/json' -d "$2"; }
field() { node -e 'const d=JSON.parse(process.argv[1]).data;console.log(d[process.argv[2]] ?? "")' "$1" "$2"; }
step "photo job through the gateway pod, run by the worker pod"
s=$(date +%s)
PHOTO=$WORK/in.png
ffmpeg -v error -y -f lavfi -i testsrc=size=320x240 -frames:v 1 "$PHOTO"
ps=$(api /api/oss/presign-put '{"filename":"in.png","content_type":"image/png"}')
curl -fsS -X PUT -H 'content-type: image/png' --data-binary @"$PHOTO" "$(field "$ps" upload_url)" >/dev/null
r=$(api /api/photo-enhancer "{\"model_name\":\"general_2x\",\"img_url\":\"$(field "$ps" access_url)\",\"extension\":\".png\"}")
JOB=$(field "$r" job_id)
[ -n "$JOB" ] || fail "submission: $r"
st=''
for _ in $(seq 300); do
  st=$(api /api/task-status "{\"job_id\":\"$JOB\"}")
  case "$(field "$st" status)" in COMPLETED|ERROR) break;; esac
  sleep 1
done
[ "$(field "$st" status)" = COMPLETED ] || fail "photo job: $st"
curl -fsS -o "$WORK/out" "$(field "$st" res_url)"
dims=$(ffprobe -v error -show_entries stream=width,height -of csv=p=0 "$WORK/out")
[ "$dims" = "640,480" ] || fail "photo result is $dims, not 640,480"
echo "   photo job $JOB COMPLETED in $(( $(date +%s) - s ))s, result $dims" >&2
pm logs "$WK" 2>&1 | grep -c "$JOB" | xargs -I{} echo "   worker log lines naming the job: {}" >&2

step "podman kube down (SIGTERM: the drain)"
s=$(date +%s)
pm kube down "$WORK/pods.yaml" >/dev/null
echo "   pods stopped in $(( $(date +%s) - s ))s" >&2
rm -f "$WORK/pods.yaml"
echo "helm-kube-play: OK in $(( $(date +%s) - T0 ))s" >&2
