# syntax=docker/dockerfile:1
# Lucent's OCI image (docs/deploy.md): one image for every role (`lucent serve --role all|gateway|worker`) and for the
# one-off commands (`lucent models fetch`, `lucent keys create`). CPU hosts run it as is (Mesa's lavapipe is the
# Vulkan device); NVIDIA hosts add the driver's Vulkan ICD at run time (docs/deploy.md#nvidia-hosts).
#
#   docker build -t lucent .            # or: podman build --format docker -t lucent . (keeps the HEALTHCHECK)
#
# Stage 1 (builder): Rust + Node 20 + libheif-dev; `npm ci` runs scripts/build-native.mjs, which compiles the addon
# and the lucent-native binary in ONE cargo invocation, then builds the playground and dist/. Dev dependencies are
# pruned and everything but the run-time files is dropped.
# Stage 2 (runtime): Debian trixie slim with Node 20, ffmpeg, libheif (+ HEIC plugins), the Vulkan loader and Mesa
# (lavapipe), tini; a non-root user; nothing written outside DATA_DIR (a volume) and /tmp (a tmpfs), so
# `--read-only` works. Model files are NOT baked in: `lucent models fetch` fills the models volume (an init step).
# No secret is baked in: keys live in the store, the server secret in DATA_DIR, S3/DB credentials come from the
# environment at run time.

ARG RUST_IMAGE=docker.io/library/rust:1-trixie
ARG RUNTIME_IMAGE=docker.io/library/debian:trixie-slim

FROM ${RUST_IMAGE} AS builder
# Node 20 (trixie's nodejs is 20.x; engines: node >= 20), its headers for node-gyp (better-sqlite3 builds from
# source when no prebuilt binary can be downloaded), libheif for lucent-codec's `heif` feature.
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm libnode-dev libheif-dev pkg-config python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV npm_config_nodedir=/usr \
    npm_config_fund=false \
    npm_config_audit=false \
    npm_config_update_notifier=false \
    npm_config_install_links=false \
    LUCENT_SKIP_MODEL_FETCH=1 \
    CARGO_TERM_PROGRESS_WHEN=never
COPY . .
# npm_config_install_links=false: Debian's npm 9 otherwise installs the file: dependency @lucent/native as a packed
# copy (no .node addon: "Cannot find native binding" at run time); npm 10's default, a link to native/node.
# `npm ci` = dependencies + scripts/build-native.mjs (addon + lucent-native, one cargo invocation) + playground + dist/.
# Then keep only what runs: the addon (native/node), the lucent-native binary (target/release, where `lucent bench`
# looks), dist/ and the server sources bin/lucent.js compares it with, models/ (catalog), playground/dist. One RUN, so
# the ~3 GB of target/ never lands in a layer.
RUN set -e; \
    node --version; cargo --version; npm --version; \
    npm ci; \
    npm prune --omit=dev; \
    node bin/lucent.js --version; \
    ls native/node/lucent.*.node; \
    node -e "require('@lucent/native'); console.log('addon loads through node_modules/@lucent/native')"; \
    mv target/release/lucent-native /tmp/lucent-native; \
    rm -rf target native/core native/codec native/gpu native/engine native/cli native/models native/node/src \
      native/node/target bench examples docs data /root/.npm /usr/local/cargo/registry; \
    mkdir -p target/release; \
    mv /tmp/lucent-native target/release/lucent-native

FROM ${RUNTIME_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs ffmpeg libheif1 libheif-plugin-libde265 libheif-plugin-x265 \
      libvulkan1 mesa-vulkan-drivers ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
RUN groupadd --system --gid 10001 lucent \
 && useradd --system --uid 10001 --gid lucent --home-dir /data --no-create-home --shell /usr/sbin/nologin lucent \
 && mkdir -p /data /models \
 && chown lucent:lucent /data /models
COPY --from=builder /app /app
# DATA_DIR: SQLite, local objects, the server secret (embedded mode); models: the catalog's weights, fetched by
# `lucent models fetch` (an init container / a one-off run), shared read-only by every process.
ENV NODE_ENV=production \
    HOME=/data \
    DATA_DIR=/data \
    LUCENT_MODEL_DIR=/models \
    HOST=0.0.0.0 \
    PORT=8080 \
    TMPDIR=/tmp \
    PATH=/app/node_modules/.bin:$PATH
VOLUME ["/data", "/models"]
WORKDIR /app
USER 10001:10001
EXPOSE 8080
# /healthz: the process is up (and, where it runs models, the engine is loaded).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/lucent.js"]
CMD ["serve"]
