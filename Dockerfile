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
# The version stamped into the binary and the label: the project's (CMakeLists.txt) by default.
ARG STASIS_VERSION=0.1.0
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_BUILD_TESTS=OFF \
      -DSTASIS_REVISION="${STASIS_REVISION}" -DSTASIS_VERSION="${STASIS_VERSION}" \
 && cmake --build build --target stasis stasis-cuda-checkpoint-private

# ---- runtime -----------------------------------------------------------------------------
FROM debian:bookworm-slim
ARG STASIS_REVISION=unknown
ARG STASIS_VERSION=0.1.0
LABEL org.opencontainers.image.title="stasis" \
      org.opencontainers.image.description="Suspend and resume GPU actors in gVisor sandboxes on Kubernetes" \
      org.opencontainers.image.version="${STASIS_VERSION}" \
      org.opencontainers.image.revision="${STASIS_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# The packages and stasis's own files come from the same two files as hack/image.sh (the image
# built without a container engine): hack/image-packages.txt and hack/image-install.sh, which
# also fails the build when a shared library of stasis is missing or the GPU helper does not
# run on its own loader.
COPY hack/image-packages.txt hack/image-install.sh /tmp/stasis-image/
RUN apt-get update \
 && sed -e 's/#.*//' -e '/^[[:space:]]*$/d' /tmp/stasis-image/image-packages.txt \
      | DEBIAN_FRONTEND=noninteractive xargs apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/*
COPY --from=runsc /out/runsc /tmp/stasis-image/runsc
COPY --from=build /src/build/stasis /tmp/stasis-image/stasis
COPY --from=build /src/build/cuda-checkpoint /tmp/stasis-image/cuda-checkpoint
RUN /tmp/stasis-image/image-install.sh / /tmp/stasis-image/stasis /tmp/stasis-image/cuda-checkpoint \
      /tmp/stasis-image/runsc \
 && rm -rf /tmp/stasis-image
# tini is PID 1: `stasis node` spawns runsc sandboxes, which are reparented to PID 1 when
# runsc exits and must be reaped. The manifests give the role as args: ["stasis", "node"].
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["stasis", "--help"]
