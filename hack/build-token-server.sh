#!/usr/bin/env bash
# Builds the distribution project's token server (contrib/token-server of
# github.com/docker/distribution, Apache-2.0) once per machine, cached by version outside the
# repo, and prints its path. It is the reference issuer of the registry token protocol: it
# authenticates a user against an htpasswd file and signs a JWT granting that user's own
# namespace (`<user>/…`), which docker-registry configured with `auth: token` verifies. The
# tests run it beside the registry so the Bearer flow meets a real token server.
source "$(dirname "$0")/lib.sh"

server="${STASIS_CACHE}/bin/distribution-token-server-${DISTRIBUTION_TOKEN_SERVER_VERSION}/token-server"
if [[ ! -x "${server}" ]]; then
  # The release predates Go modules (+incompatible): `go get` resolves its imports to the
  # modules' current releases, and the registry tests that run it check the result.
  GO_MODULE_FILE="module stasis.dev/build/token-server
go 1.26
require github.com/docker/distribution ${DISTRIBUTION_TOKEN_SERVER_VERSION}"
  go_build_cached "${server}" github.com/docker/distribution/contrib/token-server
fi
echo "${server}"
