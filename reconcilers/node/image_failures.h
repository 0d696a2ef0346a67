// How the node agent reports an actor's image that could not be made ready (actor_image.cc):
// the condition reason (api/conditions.h) for each images/ failure reason (image_reasons.h),
// and whether the resume is tried again with backoff or waits for a new generation. A pure
// decision, unit-tested in tests/unit/image_failures_test.cc.
#pragma once

#include "base/status.h"

namespace stasis {

struct ImageFailure {
  const char* reason;  // the condition's (Ready=False) and the Warning Event's
  bool retry;          // with the resume's backoff; false: not until the spec changes
};

// `pinned`: the pull was by the digest a Full snapshot was taken on, so an image that is gone
// is the snapshot's problem (SnapshotImageUnavailable), not the spec's.
ImageFailure JudgeImageFailure(const Status& failure, bool pinned);

}  // namespace stasis
