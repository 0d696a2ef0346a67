// The process collector: /proc parsing on hand-written lines (a command name with spaces and
// parentheses, a truncated line), and the live values of this test process — present, plausible,
// and moving when the process opens files, touches memory or burns CPU.
#include "controller/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "controller/metrics.h"

namespace stasis {
namespace {

std::map<std::string, double> Values(const prometheus::Collectable& c) {
  std::map<std::string, double> out;
  for (const auto& f : c.Collect()) {
    if (f.name.rfind("process_", 0) != 0) continue;
    EXPECT_EQ(f.metric.size(), 1u) << f.name;
    if (f.metric.empty()) continue;
    out[f.name] = f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value : f.metric[0].gauge.value;
  }
  return out;
}

TEST(ProcessMetricsTest, ParsesProcStatWhateverTheCommandName) {
  // proc(5): pid (comm) state ppid … utime(14) stime(15) … starttime(22) vsize(23) rss(24) …
  const std::string line =
      "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123456 "
      "987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
  auto s = ParseProcStat(line);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->utime_ticks, 250u);
  EXPECT_EQ(s->stime_ticks, 75u);
  EXPECT_EQ(s->starttime_ticks, 123456u);
  EXPECT_EQ(s->vsize_bytes, 987654321u);
  EXPECT_EQ(s->rss_pages, 2048u);

  EXPECT_FALSE(ParseProcStat("4242 (cut) S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcStat("no parenthesis at all").has_value());
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 ten 75 0 0 20 0 9 0 1 2 3").has_value());
}

TEST(ProcessMetricsTest, ParsesTheBootTime) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1767225600\nprocesses 9\n"), 1767225600u);
  EXPECT_FALSE(ParseBootTime("cpu  1 2 3\n").has_value());
  EXPECT_FALSE(ParseBootTime("btime soon\n").has_value());
}

TEST(ProcessMetricsTest, ExportsPlausibleValuesOfThisProcess) {
  ProcessCollector c;
  auto v = Values(c);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_GT(v["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(v["process_virtual_memory_bytes"], v["process_resident_memory_bytes"]);
  EXPECT_GE(v["process_open_fds"], 3);  // stdin, stdout, stderr
  EXPECT_GE(v["process_max_fds"], v["process_open_fds"]);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(v["process_start_time_seconds"], now + 1);
  EXPECT_GT(v["process_start_time_seconds"], now - 3600) << "this test started less than an hour ago";
  EXPECT_GE(v["process_cpu_seconds_total"], 0);
}

TEST(ProcessMetricsTest, ValuesMoveWithTheProcess) {
  ProcessCollector c;
  const auto before = Values(c);

  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const auto with_files = Values(c);
  EXPECT_EQ(with_files.at("process_open_fds"), before.at("process_open_fds") + 10);
  for (int fd : fds) close(fd);
  EXPECT_EQ(Values(c).at("process_open_fds"), before.at("process_open_fds"));

  // 64 MiB written page by page is resident.
  std::vector<char> block(64 << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  EXPECT_GE(Values(c).at("process_resident_memory_bytes"), before.at("process_resident_memory_bytes") + (32 << 20));

  // Busy work until the CPU counter moves by more than a clock tick or two.
  volatile uint64_t x = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  double cpu = before.at("process_cpu_seconds_total");
  while (cpu < before.at("process_cpu_seconds_total") + 0.1 && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 10'000'000; ++i) x = x + static_cast<uint64_t>(i);
    cpu = Values(c).at("process_cpu_seconds_total");
  }
  EXPECT_GE(cpu, before.at("process_cpu_seconds_total") + 0.1);
  EXPECT_EQ(Values(c).at("process_start_time_seconds"), before.at("process_start_time_seconds"));
}

TEST(ProcessMetricsTest, EveryRegistryOfMetricsCollectsThem) {
  Metrics m;
  const auto v = Values(*m.registry());
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    EXPECT_TRUE(v.count(name)) << name;
  }
}

}  // namespace
}  // namespace stasis
