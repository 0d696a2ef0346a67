// Errors of the node itself — a path the kernel refuses as too long, a directory of the agent's
// that cannot be written, a full disk — told apart from the runtime's and the workload's, so
// that a transition that meets one says which in its condition and is retried only where a
// retry can help. Pure: it reads the failure's text (runsc's stderr, libstdc++'s
// filesystem_error, strerror), never the disk.
//
// Invariants: a path too long never gets shorter by waiting (permanent); an unwritable
// directory or a full disk may be fixed by an operator (transient, retried a bounded number of
// times by the caller); "permission denied" counts as the host's only when it names one of the
// agent's own directories (the workload's own files are not the node's problem).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

struct HostError {
  const char* reason;  // an api::kReasonHost* condition reason
  bool permanent;
};

// nullopt: not an error of the host. `own_dirs`: the agent's root and snapshot store.
std::optional<HostError> ClassifyHostError(const Status& failure, const std::vector<std::string>& own_dirs);

}  // namespace stasis
