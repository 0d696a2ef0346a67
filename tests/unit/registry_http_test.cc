// The origin rule RegistryClient follows redirects by: its Authorization header goes only to
// the scheme, host and port it was meant for, never to the storage a blob is redirected to.
#include "images/registry_http.h"

#include <gtest/gtest.h>

namespace stasis::images {
namespace {

TEST(RegistryHttp, SameOriginIsSchemeHostAndPort) {
  EXPECT_TRUE(RegistryHttp::SameOrigin("https://r.example/v2/a", "https://r.example:443/v2/b?x=1"));
  EXPECT_TRUE(RegistryHttp::SameOrigin("https://R.Example:5000/v2/", "https://r.example:5000/x"));
  EXPECT_TRUE(RegistryHttp::SameOrigin("http://127.0.0.1:80/a", "http://127.0.0.1/b"));
  EXPECT_FALSE(RegistryHttp::SameOrigin("https://r.example/v2/", "https://cdn.r.example/blob"));
  EXPECT_FALSE(RegistryHttp::SameOrigin("https://r.example/v2/", "https://r.example:8443/v2/"));
  EXPECT_FALSE(RegistryHttp::SameOrigin("https://r.example/v2/", "http://r.example/v2/"));
  EXPECT_FALSE(
      RegistryHttp::SameOrigin("https://127.0.0.1:5000/", "http://127.0.0.1:9000/bucket/x"));
  EXPECT_FALSE(RegistryHttp::SameOrigin("not a url", "not a url"));
}

}  // namespace
}  // namespace stasis::images
