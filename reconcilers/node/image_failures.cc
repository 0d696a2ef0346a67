#include "reconcilers/node/image_failures.h"

#include <string>

#include "api/conditions.h"
#include "images/image_reasons.h"

namespace stasis {

ImageFailure JudgeImageFailure(const Status& failure, bool pinned) {
  namespace r = images::pull_reason;
  const std::string& why = failure.reason();
  if (why == r::kImageNotFound) {
    return {pinned ? api::kReasonSnapshotImageUnavailable : api::kReasonImageNotFound, true};
  }
  if (why == r::kUnauthorized) return {api::kReasonUnauthorized, true};
  if (why == r::kImageNotPresent) return {api::kReasonImageNotPresent, true};
  // What this node can never run from this image: a new image (a new generation) is needed.
  for (const char* bad : {r::kBadManifest, r::kBadLayer, r::kPlatformNotFound, r::kBadImageConfig,
                          r::kInvalidReference}) {
    if (why == bad) return {api::kReasonBadImage, false};
  }
  // The node's own disk, not the image: tried again, as other errors of the host are.
  if (why == r::kUnpackFailed) return {api::kReasonHostError, true};
  // The registry unreachable, a transfer cut past its resumes, a blob that is not its digest.
  return {api::kReasonImagePullFailed, true};
}

}  // namespace stasis
