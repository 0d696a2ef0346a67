#include "reconcilers/node/stray_state.h"

namespace stasis {

StrayAction DecideStray(StrayLookup lookup, bool has_local_state) {
  switch (lookup) {
    case StrayLookup::kNotFound: return StrayAction::kRemove;
    case StrayLookup::kOwnedHere: return StrayAction::kKeep;
    case StrayLookup::kOwnedElsewhere:
      // With nothing here, only a worker it may still hold on this node is freed; with a
      // sandbox or a snapshot here, that may be its only state: kept.
      return has_local_state ? StrayAction::kKeepAndReport : StrayAction::kRemove;
    case StrayLookup::kUnreadable: return StrayAction::kRetry;
  }
  return StrayAction::kRetry;
}

const char* ToString(StrayAction a) {
  switch (a) {
    case StrayAction::kRemove: return "remove";
    case StrayAction::kKeep: return "keep";
    case StrayAction::kKeepAndReport: return "keep_and_report";
    case StrayAction::kRetry: return "retry";
  }
  return "unknown";
}

}  // namespace stasis
