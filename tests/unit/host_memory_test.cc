// MemAvailable read from /proc/meminfo, for the GPU checkpoint's host-memory admission.
#include "reconcilers/node/host_memory.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

TEST(HostMemoryTest, ReadsMemAvailableInBytes) {
  const std::string meminfo =
      "MemTotal:       131072000 kB\nMemFree:         1000000 kB\nMemAvailable:   98765432 kB\n"
      "Buffers:          12345 kB\n";
  auto available = ParseMemAvailable(meminfo);
  ASSERT_TRUE(available.ok()) << available.status().ToString();
  EXPECT_EQ(*available, int64_t{98765432} * 1024);
}

TEST(HostMemoryTest, AMissingOrMalformedLineIsAnError) {
  for (const char* text : {"MemTotal: 1 kB\n", "MemAvailable: lots\n", "MemAvailable: 5 MB\n",
                           "MemAvailable: -5 kB\n", "MemAvailable: 99999999999999999 kB\n", ""}) {
    EXPECT_EQ(ParseMemAvailable(text).status().code(), Code::kInvalidArgument) << text;
  }
}

TEST(HostMemoryTest, ThisHostHasSome) {
  auto available = MemAvailableBytes();
  ASSERT_TRUE(available.ok()) << available.status().ToString();
  EXPECT_GT(*available, 0);
  EXPECT_EQ(MemAvailableBytes("/nonexistent/meminfo").status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace stasis
