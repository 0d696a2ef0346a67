#include "base/base64.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

TEST(DecodeBase64Test, DecodesWithEveryPaddingLength) {
  EXPECT_EQ(DecodeBase64("dXNlcjpwYXNz"), "user:pass");
  EXPECT_EQ(DecodeBase64("dXNlcjpwYXM="), "user:pas");
  EXPECT_EQ(DecodeBase64("dXNlcjpwYQ=="), "user:pa");
  EXPECT_EQ(DecodeBase64(""), "");
}

TEST(DecodeBase64Test, KeepsBinaryBytesAndIgnoresLineBreaks) {
  EXPECT_EQ(DecodeBase64("AP8A\n/w=="), std::string("\x00\xff\x00\xff", 4));
}

TEST(EncodeBase64Test, PadsAndRoundTrips) {
  EXPECT_EQ(EncodeBase64("user:pass"), "dXNlcjpwYXNz");
  EXPECT_EQ(EncodeBase64("user:pa"), "dXNlcjpwYQ==");
  EXPECT_EQ(EncodeBase64(""), "");
  const std::string binary("\x00\xff\x00\xff", 4);
  EXPECT_EQ(DecodeBase64(EncodeBase64(binary)), binary);
}

TEST(DecodeBase64Test, RefusesWhatIsNotBase64) {
  EXPECT_EQ(DecodeBase64("abc"), std::nullopt);       // not a multiple of four
  EXPECT_EQ(DecodeBase64("ab!d"), std::nullopt);      // not in the alphabet
  EXPECT_EQ(DecodeBase64("dXNl-jpw"), std::nullopt);  // base64url is another alphabet
}

}  // namespace
}  // namespace stasis
