// What the GPU preflight says when the cuda-checkpoint helper does not run in the sandbox.
#include "reconcilers/node/helper_preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/names.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HelperPreflight, AHelperThatRunsPasses) {
  EXPECT_TRUE(JudgeHelperPreflight("/usr/local/bin/cuda-checkpoint", {0, ""}, std::nullopt).ok());
}

// runsc's exec of a binary whose interpreter is missing fails although the binary is there; the
// loader failing too says the private directory is what is missing.
TEST(HelperPreflight, AMissingPrivateDirectoryIsNamed) {
  const HelperRun helper{1, "failed to load /usr/local/bin/cuda-checkpoint: no such file\n"};
  const HelperRun loader{1, "failed to load /opt/stasis/cuda-checkpoint/lib/ld: no such file\n"};
  Status s = JudgeHelperPreflight("/usr/local/bin/cuda-checkpoint", helper, loader);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "cuda_checkpoint_missing");
  EXPECT_THAT(s.message(), HasSubstr(std::string("private directory ") +
                                     api::kCudaCheckpointPrivateDir + " is not in the container"));
  EXPECT_THAT(s.message(), HasSubstr("/usr/local/bin/cuda-checkpoint cannot start"));
  EXPECT_THAT(s.message(), HasSubstr("manifests/cdi/stasis-cuda-checkpoint.yaml"));
  EXPECT_THAT(s.message(), HasSubstr("(exit 1: failed to load /opt/stasis"));
}

// The directory is there (its loader runs) but the helper is not, or fails: the helper is named.
TEST(HelperPreflight, AHelperThatFailsBesideItsDirectoryIsNamed) {
  Status s = JudgeHelperPreflight("/opt/x/cc", {127, "failed to load /opt/x/cc\n \n"},
                                  HelperRun{0, ""});
  EXPECT_EQ(s.reason(), "cuda_checkpoint_missing");
  EXPECT_EQ(s.message(),
            "the cuda-checkpoint binary /opt/x/cc does not run inside the container (exit 127: "
            "failed to load /opt/x/cc)");
  EXPECT_THAT(s.message(), Not(HasSubstr("private directory")));
  // Nothing on stderr: the exit status alone.
  EXPECT_THAT(JudgeHelperPreflight("/p", {2, ""}, HelperRun{0, ""}).message(),
              HasSubstr("(exit 2)"));
}

}  // namespace
}  // namespace stasis
