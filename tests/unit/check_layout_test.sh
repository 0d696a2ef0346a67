#!/usr/bin/env bash
# hack/check-layout.sh on small trees made here: a clean one passes; one with each kind of
# violation fails and reports every one of them, where it is, and nothing else.
set -euo pipefail

script="$(cd "$(dirname "$0")/../.." && pwd)/hack/check-layout.sh"
tree="$(mktemp -d)"
trap 'rm -rf "${tree}"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# A function of `body` statement lines (plus its signature and closing brace).
function_of() {
  local name="$1" body="$2"
  echo "int ${name}(int x) {"
  for ((i = 0; i < body; i++)); do echo "  x += ${i};"; done
  echo "}"
}

# Clean: every limit met exactly, every layer including only what is below it.
mkdir -p "${tree}"/{base,api,controller,runtimes,snapshots,reconcilers/node,reconcilers/cluster,cmd/stasis}
for ((i = 0; i < 600; i++)); do echo "// line ${i}"; done > "${tree}/base/six_hundred.h"
function_of Eighty 78 > "${tree}/base/eighty.cc"
echo '#include "base/eighty.h"' > "${tree}/api/actor.h"
printf '#include "api/actor.h"\n#include "controller/informer.h"\n#include "runtimes/driver.h"\n' \
  > "${tree}/reconcilers/node/agent.cc"
printf '#include "reconcilers/node/agent.h"\n#include "reconcilers/cluster/controller.h"\n' \
  > "${tree}/cmd/stasis/main.cc"
echo '#include <cpprest/http_client.h>' > "${tree}/controller/cpprest_transport.cc"

out="$("${script}" "${tree}" 2>&1)" || fail "a clean tree is refused:"$'\n'"${out}"

# One of each violation.
echo '// line 600' >> "${tree}/base/six_hundred.h"
function_of EightyOne 79 > "${tree}/snapshots/long.cc"
echo '#include "controller/informer.h"' >> "${tree}/api/actor.h"
echo '#include "reconcilers/cluster/controller.h"' >> "${tree}/reconcilers/node/agent.cc"
echo '#include "tests/support/sandbox.h"' > "${tree}/runtimes/driver.cc"
echo '#include "cmd/stasis/flags.h"' > "${tree}/reconcilers/roles.h"
echo '#include <cpprest/json.h>' > "${tree}/controller/informer.cc"

rc=0
out="$("${script}" "${tree}" 2>/dev/null)" || rc=$?
[[ ${rc} == 1 ]] || fail "exit status ${rc} on a tree with violations, want 1"
expect() {
  grep -qF -- "$1" <<<"${out}" || fail "not reported: $1"
}
expect "base/six_hundred.h:1: file has 601 lines (limit 600)"
expect "snapshots/long.cc:1: function EightyOne has 81 lines (limit 80)"
expect "api/actor.h:2: includes \"controller/informer.h\" (api/ may not include controller/)"
expect "reconcilers/node/agent.cc:4: includes \"reconcilers/cluster/controller.h\""
expect "runtimes/driver.cc:1: includes \"tests/support/sandbox.h\""
expect "reconcilers/roles.h:1: includes \"cmd/stasis/flags.h\""
expect "controller/informer.cc:1: includes <cpprest/...>"
lines=$(grep -c . <<<"${out}")
[[ ${lines} == 7 ]] || fail "${lines} lines reported, want 7:"$'\n'"${out}"

((failures == 0)) && echo "PASS" || exit 1
