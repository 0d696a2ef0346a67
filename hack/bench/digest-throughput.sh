#!/usr/bin/env bash
# How fast stasis hashes a snapshot, against the standard tools doing the same work on the same
# cores: an image file of --mb MiB (random bytes, page cache warm) cut into the manifest's 8 MiB
# chunks, hashed --rounds times, interleaved, by
#   stasis    bench_digest_throughput: HashFilesChunked on every available CPU, as a snapshot
#             completion, commit or verification does (the whole process timed, start included)
#   sha256sum the same chunks as files, split evenly over one sha256sum process per CPU (xargs -P)
#   openssl   the same, with `openssl dgst -sha256` (OpenSSL's SHA-NI code, as stasis links)
# Prints the median wall time and throughput of each, stasis against the faster peer as a ratio
# of throughput, and the target verdict (≥ 0.8). The chunk digests stasis computes are checked
# against sha256sum's first: a fast wrong answer is no answer. Nothing is left behind.
#
#   hack/bench/digest-throughput.sh [--mb N] [--rounds N] [--dir DIR]
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

mb=1024 rounds=7 dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_digest_throughput -j2 >/dev/null
work="${dir:-$(mktemp -d /var/tmp/stasis-bench-digest.XXXXXX)}"
mkdir -p "${work}/chunks"
trap 'rm -rf "${work}"' EXIT

cpus="$(nproc)"
head -c "$((mb << 20))" /dev/urandom >"${work}/pages.img"
(cd "${work}/chunks" && split -b 8M -d -a 6 ../pages.img c)
chunks="$(ls "${work}/chunks" | wc -l)"
per_process=$(((chunks + cpus - 1) / cpus))
log "${mb} MiB = ${chunks} chunks of 8 MiB, ${cpus} CPUs, ${rounds} rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# Correctness first: every chunk digest as sha256sum computes it.
diff <("${build}/tests/bench_digest_throughput" "${work}/pages.img" "${cpus}" --print) \
  <(cd "${work}/chunks" && ls | xargs sha256sum | awk '{print $1}') >/dev/null ||
  die "stasis's chunk digests differ from sha256sum's"

ms_of() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
stasis_run() { "${build}/tests/bench_digest_throughput" "${work}/pages.img" "${cpus}"; }
sha256sum_run() { (cd "${work}/chunks" && ls | xargs -P "${cpus}" -n "${per_process}" sha256sum); }
openssl_run() { (cd "${work}/chunks" && ls | xargs -P "${cpus}" -n "${per_process}" openssl dgst -sha256); }

declare -A samples=([stasis]="" [sha256sum]="" [openssl]="")
for _ in $(seq "${rounds}"); do
  for tool in stasis sha256sum openssl; do samples[${tool}]+="$(ms_of "${tool}_run") "; done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '%-10s %10s %10s\n' tool "median ms" "MB/s"
declare -A med
for tool in stasis sha256sum openssl; do
  med[${tool}]="$(median "${samples[${tool}]}")"
  require_positive "${tool} median" "${med[${tool}]}"
  printf '%-10s %10s %10.0f\n' "${tool}" "${med[${tool}]}" "$(echo "${mb} * 1048.576 / ${med[${tool}]}" | bc -l)"
done
peer=sha256sum
((med[openssl] < med[sha256sum])) && peer=openssl
ratio="$(printf "%.3f" "$(echo "${med[${peer}]} / ${med[stasis]}" | bc -l)")"
echo "stasis throughput / fastest peer (${peer}): ${ratio} (target ≥ 0.8: $(verdict "${ratio}" '>=' 0.8))"
