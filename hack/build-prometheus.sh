#!/usr/bin/env bash
# Builds Prometheus with Kubernetes service discovery, once per machine, cached by version
# outside the repo, and prints its path. Debian 12's Prometheus (2.42, the one the monitoring
# tests run) is built without `kubernetes_sd_configs`; the cluster test scrapes the deployed
# pods through it, as a Prometheus in a real cluster would.
#
# Only the file, HTTP and Kubernetes discoverers are compiled in (upstream's build tags
# remove_all_sd and enable_kubernetes_sd): the full set pulls every cloud provider's SDK, which
# took most of a 24-minute cold build here, for nothing the cluster test uses. The web UI's
# assets are not embedded either (the tests use the HTTP API only).
source "$(dirname "$0")/lib.sh"

dest="${STASIS_CACHE}/bin/prometheus-${PROMETHEUS_VERSION}/prometheus"
GO_MODULE_FILE="module stasis.dev/build/prometheus
go 1.26
require github.com/prometheus/prometheus ${PROMETHEUS_VERSION}"
go_build_cached "${dest}" github.com/prometheus/prometheus/cmd/prometheus \
  "-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}" \
  "remove_all_sd,enable_kubernetes_sd"
echo "${dest}"
