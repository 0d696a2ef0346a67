# syntax=docker/dockerfile:1
# The stasis image: `stasis` (both roles), runsc, the stasis-cuda-checkpoint helper and tini.
#   docker build -t stasis:0.1.0 .
# Debian 12 (bookworm) throughout, like the CI machine: the build stage uses Debian's -dev
# packages (the library part of hack/install-deps.sh), the runtime stage their shared
# libraries. runsc is built by hack/runsc.sh itself, so the image gets the same commit, the
# same version stamp and the same -cuda-checkpoint-path check as a local build
# (hack/versions.env; docs/runsc-version.md). Build arg STASIS_RUNSC_STRICT=1 refuses the
# documented fallback when the pinned commit is not served.

# ---- runsc, from gVisor's Go module (go branch) ------------------------------------------
FROM golang:1.26-bookworm AS runsc
ARG STASIS_RUNSC_STRICT=0
WORKDIR /src
COPY hack/lib.sh hack/versions.env hack/runsc.sh hack/
RUN STASIS_CACHE=/cache STASIS_RUNSC_STRICT="${STASIS_RUNSC_STRICT}" hack/runsc.sh > /tmp/runsc-path \
 && install -D -m 0755 "$(cat /tmp/runsc-path)" /out/runsc

# ---- stasis and stasis-cuda-checkpoint, with CMake and Ninja ----------------------------
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libcpprest-dev libboost-dev libssl-dev nlohmann-json3-dev prometheus-cpp-dev \
      libspdlog-dev libfmt-dev libyaml-cpp-dev libarchive-dev \
      libcurl4-openssl-dev libexpat1-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY base base
COPY api api
COPY controller controller
COPY runtimes runtimes
COPY snapshots snapshots
COPY reconcilers reconcilers
COPY cmd cmd
# The git revision (the build context holds no .git): docker build --build-arg
# STASIS_REVISION=$(git rev-parse --short=12 HEAD) …
ARG STASIS_REVISION=unknown
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_BUILD_TESTS=OFF \
      -DSTASIS_REVISION="${STASIS_REVISION}" \
 && cmake --build build --target stasis stasis-cuda-checkpoint-private

# ---- runtime -----------------------------------------------------------------------------
FROM debian:bookworm-slim
ARG STASIS_REVISION=unknown
LABEL org.opencontainers.image.title="stasis" \
      org.opencontainers.image.description="Suspend and resume GPU actors in gVisor sandboxes on Kubernetes" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${STASIS_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      tini ca-certificates \
      libcpprest2.10 libssl3 libprometheus-cpp-core1.0 libspdlog1.10 libfmt9 libyaml-cpp0.7 libarchive13 \
      libcurl4 libexpat1 libzstd1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=runsc /out/runsc /usr/local/bin/runsc
COPY --from=build /src/build/stasis /usr/local/bin/stasis
# The host path of manifests/cdi/'s spec: the gpu overlay installs it from here, and runsc
# started by the node agent (in this container) finds it here too.
# The self-contained helper: build/cuda-checkpoint/ (the helper and lib/, its own glibc loader
# and libraries), mounted at /opt/stasis/cuda-checkpoint in GPU containers (docs/gpu.md).
COPY --from=build /src/build/cuda-checkpoint /usr/lib/stasis/cuda-checkpoint
# A missing shared library fails the build here, not the pod at start. The helper's interpreter
# is where CDI mounts its directory, so it is run through that directory's loader here.
RUN if ldd /usr/local/bin/stasis | grep 'not found'; then echo "missing shared libraries for stasis" >&2; exit 1; fi \
 && h=/usr/lib/stasis/cuda-checkpoint \
 && "$h"/lib/ld-linux-*.so.* --library-path "$h/lib" "$h/stasis-cuda-checkpoint" --help >/dev/null \
 && stasis --version && runsc --version
# tini is PID 1: `stasis node` spawns runsc sandboxes, which are reparented to PID 1 when
# runsc exits and must be reaped. The manifests give the role as args: ["stasis", "node"].
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["stasis", "--help"]
