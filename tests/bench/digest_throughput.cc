// One run of the snapshot hasher over one file, for hack/bench/digest-throughput.sh, which
// times it (a whole process, as it times its peers) against sha256sum and openssl over the same
// chunks on the same cores:
//   bench_digest_throughput FILE THREADS [--print]
// hashes FILE in kDefaultChunkBytes chunks on THREADS threads (HashFilesChunked, as a snapshot
// completion does) and prints the number of chunks, or with --print every chunk's sha256, one
// per line (the script checks them against sha256sum's).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "snapshots/chunk_digest.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE THREADS [--print]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]);
  auto digests = stasis::HashFilesChunked({argv[1]}, stasis::kDefaultChunkBytes, threads);
  if (!digests.ok()) {
    std::fprintf(stderr, "%s\n", digests.status().ToString().c_str());
    return 1;
  }
  const auto& chunks = digests->front().chunks;
  if (argc > 3 && !std::strcmp(argv[3], "--print")) {
    for (const auto& c : chunks) std::printf("%s\n", c.c_str());
  } else {
    std::printf("%zu\n", chunks.size());
  }
  return 0;
}
