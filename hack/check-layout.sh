#!/usr/bin/env bash
# Limits that keep the house readable, checked on the production folders (README's layout
# table says what each folder is for):
#   - a source file over 600 lines, a function over 80: each usually holds two responsibilities;
#   - an #include "dir/..." that reaches up or sideways across the layers
#       cmd/ → reconcilers/{node,cluster} → reconcilers/ → runtimes/ snapshots/ images/ controller/ api/ → base/
#     (runtimes/, snapshots/, images/ and controller/ use only base/; api/ only base/; the two roles never
#     each other; nothing in production includes cmd/ or tests/);
#   - <cpprest/...> outside controller/cpprest_transport.cc, the one HTTP transport.
# Prints every violation as `path:line: what` and exits 1 if there is any.
#
#   hack/check-layout.sh          the repository
#   hack/check-layout.sh DIR      a tree laid out like it (tests/unit/check_layout_test.sh)
#
# Function extents come from universal-ctags (its C/C++ parser knows where a definition ends;
# brace counting in awk would be fooled by braces in strings, comments and macros, and a
# libclang tool would need a compilation database and a build before the fast check).
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "${root}"

readonly max_file_lines=600 max_function_lines=80
dirs=()
for d in api base controller runtimes snapshots images reconcilers cmd; do [[ -d "${d}" ]] && dirs+=("${d}"); done
((${#dirs[@]})) || { echo "check-layout: no production folders under ${root}" >&2; exit 2; }
command -v ctags >/dev/null || { echo "check-layout: universal-ctags is required (hack/install-deps.sh)" >&2; exit 2; }
command -v jq >/dev/null || { echo "check-layout: jq is required (hack/install-deps.sh)" >&2; exit 2; }

mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.c' \) | sort)
violations=0
report() { echo "$1"; violations=$((violations + 1)); }

# The layer a file belongs to, or an #include's target: its folder, with reconcilers/ split into
# its two roles and what they share. "" for an include that names no project folder.
layer_of() {
  case "$1" in
    reconcilers/node/*) echo reconcilers/node ;;
    reconcilers/cluster/*) echo reconcilers/cluster ;;
    api/* | base/* | controller/* | runtimes/* | snapshots/* | images/* | reconcilers/* | cmd/* | tests/*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}

# Whether a file of layer $1 may include from layer $2.
may_include() {
  local from="$1" to="$2"
  [[ "${from}" == "${to}" ]] && return 0
  case "${from}" in
    base) return 1 ;;
    api | controller | runtimes | snapshots | images) [[ "${to}" == base ]] ;;
    reconcilers) [[ "${to}" != reconcilers/* && "${to}" != cmd && "${to}" != tests ]] ;;
    reconcilers/node) [[ "${to}" != reconcilers/cluster && "${to}" != cmd && "${to}" != tests ]] ;;
    reconcilers/cluster) [[ "${to}" != reconcilers/node && "${to}" != cmd && "${to}" != tests ]] ;;
    cmd) [[ "${to}" != tests ]] ;;
    *) return 1 ;;
  esac
}

for f in "${files[@]}"; do
  lines=$(wc -l < "${f}")
  ((lines > max_file_lines)) && report "${f}:1: file has ${lines} lines (limit ${max_file_lines})"

  from="$(layer_of "${f}")"
  while IFS=: read -r n target; do
    to="$(layer_of "${target}")"
    [[ -z "${to}" ]] || may_include "${from}" "${to}" ||
      report "${f}:${n}: includes \"${target}\" (${from}/ may not include ${to}/)"
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "${f}" |
           sed -E 's/^([0-9]+):.*"([^"]+)".*/\1:\2/')

  if [[ "${f}" != controller/cpprest_transport.cc ]]; then
    while IFS=: read -r n _; do
      report "${f}:${n}: includes <cpprest/...> (only controller/cpprest_transport.cc may)"
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<cpprest/' "${f}" || true)
  fi
done

while read -r line; do
  report "${line}"
done < <(ctags --fields=+ne --output-format=json --kinds-C++=f --kinds-C=f -f - "${files[@]}" |
         jq -r --argjson max "${max_function_lines}" '
           select(.end != null and .end - .line + 1 > $max)
           | "\(.path):\(.line): function \(.name) has \(.end - .line + 1) lines (limit \($max))"')

if ((violations)); then
  echo "check-layout: ${violations} violation(s)" >&2
  exit 1
fi
