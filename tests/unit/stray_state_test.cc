// DecideStray (stray_state.h): state of an actor missing from the agent's cache is removed only
// on a quorum read's NotFound; an actor owned elsewhere keeps what it has here.
#include "reconcilers/node/stray_state.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

TEST(StrayState, EveryLookupWithAndWithoutLocalState) {
  struct Row {
    StrayLookup lookup;
    bool local;
    StrayAction want;
  };
  const Row rows[] = {
      {StrayLookup::kNotFound, true, StrayAction::kRemove},
      {StrayLookup::kNotFound, false, StrayAction::kRemove},
      {StrayLookup::kOwnedHere, true, StrayAction::kKeep},
      {StrayLookup::kOwnedHere, false, StrayAction::kKeep},
      {StrayLookup::kOwnedElsewhere, true, StrayAction::kKeepAndReport},
      {StrayLookup::kOwnedElsewhere, false, StrayAction::kRemove},
      {StrayLookup::kUnreadable, true, StrayAction::kRetry},
      {StrayLookup::kUnreadable, false, StrayAction::kRetry},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(ToString(DecideStray(r.lookup, r.local)), std::string(ToString(r.want)))
        << static_cast<int>(r.lookup) << " local=" << r.local;
  }
}

}  // namespace
}  // namespace stasis
