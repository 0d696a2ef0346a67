#!/usr/bin/env bash
# Builds SeaweedFS's `weed` from its Go module once per machine, cached by version outside the
# repo, and prints its path.
source "$(dirname "$0")/lib.sh"

weed="${STASIS_CACHE}/bin/seaweedfs-${SEAWEEDFS_VERSION}/weed"
if [[ ! -x "${weed}" ]]; then
  # The module's own go.mod replaces a deleted dependency with its maintained fork; replace
  # directives of a dependency are ignored, so the throwaway module repeats it.
  GO_MODULE_FILE="module stasis.dev/build/seaweedfs
go 1.26
require github.com/seaweedfs/seaweedfs ${SEAWEEDFS_VERSION}
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0"
  go_build_cached "${weed}" github.com/seaweedfs/seaweedfs/weed
fi
echo "${weed}"
