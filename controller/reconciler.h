// The one interface every stasis reconciler implements (controller-runtime's
// Reconcile(ctx, Request) (Result, error)). A reconcile reads the desired state, compares it
// with the world and takes one step towards it; it is idempotent and may be called any number
// of times for the same key.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"

namespace stasis {

struct Request {
  std::string ns;  // empty for cluster-scoped objects
  std::string name;
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
  static Request FromKey(const std::string& key) {
    auto slash = key.find('/');
    if (slash == std::string::npos) return {"", key};
    return {key.substr(0, slash), key.substr(slash + 1)};
  }
};

struct ReconcileOutcome {
  // Call again after this long (e.g. to poll a deadline); 0 = only on the next change.
  std::chrono::milliseconds requeue_after{0};
  // Call again soon with backoff, without counting it as an error.
  bool requeue = false;
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // An error requeues the key with per-key exponential backoff.
  virtual Result<ReconcileOutcome> Reconcile(const Request& request) = 0;
};

}  // namespace stasis
