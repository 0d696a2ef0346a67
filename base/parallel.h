// Work spread over threads: one pool per call, the caller's thread one of them. For CPU-bound
// batches (hashing a snapshot's chunks) where the answer must not depend on which thread ran
// what: the failure reported is the one with the lowest index.
#pragma once

#include <cstddef>
#include <functional>

#include "base/status.h"

namespace stasis {

// The CPUs this process may run on (its affinity mask: a container's cpuset, not the host's
// count), at least 1.
int AvailableCpus();

// How many threads ParallelFor runs for `n` items: `threads` (0: AvailableCpus()), at most n,
// at least 1.
size_t WorkersFor(size_t n, int threads);

// Calls fn(i, worker) for every i in [0, n) on WorkersFor(n, threads) threads; `worker` in
// [0, workers) names the calling thread (for buffers of its own). After a failure no new index
// is started; returns the failure with the lowest index, or OK.
Status ParallelFor(size_t n, int threads, const std::function<Status(size_t i, size_t worker)>& fn);

}  // namespace stasis
