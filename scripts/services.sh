#!/usr/bin/env bash
# Starts the scale-out services on loopback for tests/CI, idempotently, and prints the environment to export:
#   Redis       127.0.0.1:${LUCENT_SVC_REDIS_PORT:-6390}  (redis-server, Debian package `redis-server`)
#   PostgreSQL  127.0.0.1:${LUCENT_SVC_PG_PORT:-5433}     (a private cluster in $DIR/pg, Debian package `postgresql`)
#   S3          127.0.0.1:${LUCENT_SVC_S3_PORT:-9000}     (moto's S3 server when installed, else s3rver from npm),
#                                                    bucket `lucent`
# State lives in ${LUCENT_SERVICES_DIR:-/tmp/lucent-services}. Running it again reuses what is already up.
# Test isolation (test/support/redis-db.ts, test/scaleout/services.ts): each scale-out test leases a Redis db number
# of its own (64 here: suites side by side, several checkouts) and creates a PostgreSQL database and an S3 bucket of
# its own, so nothing here is flushed or shared between tests.
#   eval "$(scripts/services.sh)"      # start (or reuse) and export LUCENT_DATABASE_URL, LUCENT_REDIS_URL, LUCENT_S3_*
#   scripts/services.sh stop           # stops the three services started here
# Exit status 1 (with a message on stderr) when a service cannot be started. The test/dev PostgreSQL cluster uses
# `trust` authentication on loopback only: never use this script for a production deployment.
set -euo pipefail

DIR=${LUCENT_SERVICES_DIR:-/tmp/lucent-services}
REDIS_PORT=${LUCENT_SVC_REDIS_PORT:-6390}
PG_PORT=${LUCENT_SVC_PG_PORT:-5433}
S3_PORT=${LUCENT_SVC_S3_PORT:-9000}
BUCKET=${LUCENT_SVC_BUCKET:-lucent}
mkdir -p "$DIR"
chmod 755 "$DIR"

log() { echo "services: $*" >&2; }
fail() { log "$*"; exit 1; }

pg_bin() {
  local b
  for b in "$(command -v pg_ctl 2>/dev/null || true)" /usr/lib/postgresql/*/bin/pg_ctl; do
    [ -n "$b" ] && [ -x "$b" ] && { dirname "$(readlink -f "$b")"; return 0; }
  done
  return 1
}

# Runs a command as the postgres OS user when we are root (initdb/postgres refuse to run as root).
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop_all() {
  redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  local bin
  if bin=$(pg_bin) && [ -d "$DIR/pg/data" ]; then as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -m fast stop >/dev/null 2>&1 || true; fi
  if [ -f "$DIR/s3.pid" ]; then kill "$(cat "$DIR/s3.pid")" 2>/dev/null || true; rm -f "$DIR/s3.pid"; fi
  log "stopped"
}

start_redis() {
  if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then return 0; fi
  command -v redis-server >/dev/null || fail "redis-server not installed (Debian: apt-get install redis-server)"
  mkdir -p "$DIR/redis"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --dir "$DIR/redis" \
    --pidfile "$DIR/redis/redis.pid" --logfile "$DIR/redis/redis.log" --save '' --appendonly no --databases 64 >/dev/null 9>&-
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.1
  done
  fail "redis did not start (see $DIR/redis/redis.log)"
}

start_pg() {
  local bin
  bin=$(pg_bin) || fail "PostgreSQL not installed (Debian: apt-get install postgresql)"
  if ! "$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q 2>/dev/null; then
    mkdir -p "$DIR/pg"
    [ "$(id -u)" = 0 ] && chown postgres: "$DIR/pg"
    if [ ! -f "$DIR/pg/data/PG_VERSION" ]; then
      as_pg "$bin/initdb" -D "$DIR/pg/data" -U postgres --auth=trust -E UTF8 --no-locale >"$DIR/pg/initdb.log" 2>&1 \
        || fail "initdb failed (see $DIR/pg/initdb.log)"
    fi
    as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -l "$DIR/pg/server.log" -w -t 30 \
      -o "-p $PG_PORT -k $DIR/pg -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" start >/dev/null 9>&- \
      || fail "postgres did not start (see $DIR/pg/server.log)"
  fi
  if ! "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='lucent'" postgres | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres lucent 2>/dev/null || true
  fi
}

s3_up() { curl -s -o /dev/null -m 2 "http://127.0.0.1:$S3_PORT/" 2>/dev/null; }

# The S3 server: moto (PyPI `moto[server]`) when it is on PATH, else s3rver (npm) installed under $DIR, else moto
# installed from PyPI (plain pip, else a venv in $DIR). Its kind is recorded in $DIR/s3.kind (credentials differ).
find_moto() {
  if command -v moto_server >/dev/null; then command -v moto_server; return 0; fi
  [ -x "$DIR/venv/bin/moto_server" ] && { echo "$DIR/venv/bin/moto_server"; return 0; }
  return 1
}

install_s3() {
  find_moto >/dev/null && return 0
  [ -x "$DIR/s3rver/node_modules/.bin/s3rver" ] && return 0
  # no moto yet: s3rver from npm installs in seconds; moto from PyPI (plain pip, else a venv) is the fallback
  if command -v npm >/dev/null; then
    log "installing s3rver from npm"
    mkdir -p "$DIR/s3rver"
    npm install --prefix "$DIR/s3rver" --no-audit --no-fund --loglevel=error s3rver >&2 && return 0
  fi
  log "installing moto[server] from PyPI"
  if { command -v pip3 >/dev/null && pip3 install -q 'moto[server]' >&2; } && hash -r && find_moto >/dev/null; then return 0; fi
  if python3 -m venv "$DIR/venv" >&2 && "$DIR/venv/bin/pip" install -q 'moto[server]' >&2; then return 0; fi
  fail "could not install an S3 server (s3rver from npm or moto from PyPI)"
}

start_s3() {
  if ! s3_up; then
    install_s3
    local moto
    if moto=$(find_moto); then
      echo moto >"$DIR/s3.kind"
      nohup "$moto" -H 127.0.0.1 -p "$S3_PORT" >"$DIR/s3.log" 2>&1 9>&- &
    else
      echo s3rver >"$DIR/s3.kind"
      mkdir -p "$DIR/s3rver/data"
      nohup "$DIR/s3rver/node_modules/.bin/s3rver" -d "$DIR/s3rver/data" -a 127.0.0.1 -p "$S3_PORT" --configure-bucket "$BUCKET" \
        >"$DIR/s3.log" 2>&1 9>&- &
    fi
    echo $! >"$DIR/s3.pid"
    for _ in $(seq 100); do s3_up && break; sleep 0.2; done
    s3_up || fail "the S3 server did not start (see $DIR/s3.log)"
  fi
  # moto accepts unsigned requests: create the bucket (s3rver created it at start)
  [ "$(cat "$DIR/s3.kind" 2>/dev/null)" = s3rver ] || curl -s -o /dev/null -m 5 -X PUT "http://127.0.0.1:$S3_PORT/$BUCKET" || true
}

if [ "${1:-start}" = stop ]; then
  ( flock 9; stop_all ) 9>"$DIR/lock"
  exit 0
fi

(
  flock 9
  start_redis
  start_pg
  start_s3
) 9>"$DIR/lock"

# s3rver has fixed credentials; moto accepts any
S3_KEY=test
[ "$(cat "$DIR/s3.kind" 2>/dev/null)" = s3rver ] && S3_KEY=S3RVER
cat <<EOF
export LUCENT_REDIS_URL=redis://127.0.0.1:$REDIS_PORT
export LUCENT_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/lucent
export LUCENT_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export LUCENT_S3_BUCKET=$BUCKET
export LUCENT_S3_REGION=us-east-1
export LUCENT_S3_ACCESS_KEY_ID=$S3_KEY
export LUCENT_S3_SECRET_ACCESS_KEY=$S3_KEY
export LUCENT_S3_FORCE_PATH_STYLE=1
EOF
