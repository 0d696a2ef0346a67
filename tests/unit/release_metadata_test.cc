// What a user sees of a release agrees with itself: the license file is Apache-2.0 as the image
// label and README say, and the image's version label is the version the binary reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

const std::string kSource = STASIS_SOURCE_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string FirstMatch(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : "";
}

TEST(ReleaseMetadataTest, TheLicenseIsApacheTwoWhereverItIsNamed) {
  const std::string license = ReadFile(kSource + "/LICENSE");
  EXPECT_THAT(license, ::testing::HasSubstr("Apache License"));
  EXPECT_THAT(license, ::testing::HasSubstr("Version 2.0, January 2004"));
  EXPECT_EQ(FirstMatch(ReadFile(kSource + "/Dockerfile"), "org\\.opencontainers\\.image\\.licenses=\"([^\"]+)\""),
            "Apache-2.0");
  EXPECT_THAT(ReadFile(kSource + "/README.md"), ::testing::HasSubstr("[LICENSE](LICENSE)"));
}

TEST(ReleaseMetadataTest, TheImageLabelCarriesTheProjectVersion) {
  const std::string version =
      FirstMatch(ReadFile(kSource + "/CMakeLists.txt"), "project\\(stasis VERSION ([0-9.]+)");
  ASSERT_FALSE(version.empty());
  const std::string dockerfile = ReadFile(kSource + "/Dockerfile");
  // The label is the version stamped into the binary, which is the project's by default in
  // both stages (hack/image.sh stamps the same; --version stamps another).
  EXPECT_EQ(FirstMatch(dockerfile, "org\\.opencontainers\\.image\\.version=\"([^\"]+)\""), "${STASIS_VERSION}");
  const std::regex arg("ARG STASIS_VERSION=(\\S+)");
  int args = 0;
  for (auto it = std::sregex_iterator(dockerfile.begin(), dockerfile.end(), arg); it != std::sregex_iterator(); ++it) {
    ++args;
    EXPECT_EQ((*it)[1], version) << "a Dockerfile stage's default STASIS_VERSION";
  }
  EXPECT_EQ(args, 2) << "the build stage and the runtime stage each declare STASIS_VERSION";
}

}  // namespace
