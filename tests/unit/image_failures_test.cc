#include "reconcilers/node/image_failures.h"

#include <gtest/gtest.h>

#include <string>

#include "api/conditions.h"
#include "images/image_reasons.h"

namespace stasis {
namespace {

namespace r = images::pull_reason;

ImageFailure Judge(const char* reason, bool pinned = false) {
  return JudgeImageFailure(Status(Code::kInternal, "x", reason), pinned);
}

TEST(ImageFailuresTest, WhatTheRegistryMayYetServeIsRetried) {
  for (const char* reason : {r::kImageNotFound, r::kUnauthorized, r::kImageNotPresent, r::kRegistryUnavailable,
                             r::kDigestMismatch, r::kUnpackFailed}) {
    EXPECT_TRUE(Judge(reason).retry) << reason;
  }
  EXPECT_EQ(std::string(Judge(r::kImageNotFound).reason), api::kReasonImageNotFound);
  EXPECT_EQ(std::string(Judge(r::kUnauthorized).reason), api::kReasonUnauthorized);
  EXPECT_EQ(std::string(Judge(r::kImageNotPresent).reason), api::kReasonImageNotPresent);
  EXPECT_EQ(std::string(Judge(r::kRegistryUnavailable).reason), api::kReasonImagePullFailed);
  EXPECT_EQ(std::string(Judge(r::kDigestMismatch).reason), api::kReasonImagePullFailed);
  EXPECT_EQ(std::string(Judge("").reason), api::kReasonImagePullFailed) << "an unnamed failure";
}

TEST(ImageFailuresTest, AnImageThisNodeCanNeverRunWaitsForANewGeneration) {
  for (const char* reason : {r::kBadManifest, r::kBadLayer, r::kPlatformNotFound, r::kBadImageConfig,
                             r::kInvalidReference}) {
    const ImageFailure f = Judge(reason);
    EXPECT_EQ(std::string(f.reason), api::kReasonBadImage) << reason;
    EXPECT_FALSE(f.retry) << reason;
  }
}

TEST(ImageFailuresTest, TheHostsDiskIsAHostError) {
  EXPECT_EQ(std::string(Judge(r::kUnpackFailed).reason), api::kReasonHostError);
}

TEST(ImageFailuresTest, ASnapshotsImageThatIsGoneIsTheSnapshotsProblem) {
  EXPECT_EQ(std::string(Judge(r::kImageNotFound, /*pinned=*/true).reason), api::kReasonSnapshotImageUnavailable);
  EXPECT_TRUE(Judge(r::kImageNotFound, true).retry) << "the image may be pushed back";
  EXPECT_EQ(std::string(Judge(r::kUnauthorized, true).reason), api::kReasonUnauthorized);
}

}  // namespace
}  // namespace stasis
