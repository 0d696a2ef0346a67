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
  EXPECT_EQ(FirstMatch(ReadFile(kSource + "/Dockerfile"), "org\\.opencontainers\\.image\\.version=\"([^\"]+)\""),
            version);
}

}  // namespace
