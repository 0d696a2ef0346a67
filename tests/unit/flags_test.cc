// The command line cannot mislead: booleans strict in both spellings (flag and environment), an
// unknown log level or format an error, JSON log lines that carry the event's fields.
#include "cmd/stasis/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <spdlog/sinks/ostream_sink.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cmd/stasis/logging.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;

Flags Defined() {
  Flags f;
  f.Define("leader-elect", "true", "elect a leader");
  f.Define("bundle-root-per-namespace", "false", "per namespace");
  f.Define("workers", "1", "slots");
  return f;
}

// Sets an environment variable for one test's scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvVar() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(FlagsTest, BooleansTakeGosSpellingsFromTheCommandLineAndTheEnvironment) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    EnvVar env("STASIS_BUNDLE_ROOT_PER_NAMESPACE", t);
    Flags f = Defined();
    ASSERT_TRUE(f.Parse({}).ok()) << t;
    EXPECT_TRUE(f.GetBool("bundle-root-per-namespace")) << t;
  }
  for (const char* v : {"0", "f", "F", "FALSE", "false", "False"}) {
    Flags f = Defined();
    ASSERT_TRUE(f.Parse({std::string("--leader-elect=") + v}).ok()) << v;
    EXPECT_FALSE(f.GetBool("leader-elect")) << v;
  }
  Flags bare = Defined();
  ASSERT_TRUE(bare.Parse({"--bundle-root-per-namespace", "--workers", "3"}).ok());
  EXPECT_TRUE(bare.GetBool("bundle-root-per-namespace"));
  EXPECT_EQ(*bare.GetInt("workers", 1, 8), 3);
}

TEST(FlagsTest, ABooleanThatIsNeitherIsAnErrorNeverSilentlyFalse) {
  {
    EnvVar env("STASIS_LEADER_ELECT", "yes");
    Flags f = Defined();
    const Status s = f.Parse({});
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("--leader-elect (or STASIS_LEADER_ELECT) is \"yes\": want true or false"));
  }
  Flags f = Defined();
  EXPECT_EQ(f.Parse({"--bundle-root-per-namespace=on"}).code(), Code::kInvalidArgument);
  EXPECT_THAT(Defined().Parse({"--no-such-flag"}).message(), HasSubstr("unknown flag --no-such-flag"));
  Flags n = Defined();
  ASSERT_TRUE(n.Parse({"--workers=9"}).ok());
  EXPECT_THAT(n.GetInt("workers", 1, 8).status().message(), HasSubstr("want an integer in [1, 8]"));
}

TEST(FlagsTest, ASizeTakesKubernetesQuantitySuffixesAndNothingElse) {
  auto parsed = [](const std::string& v) {
    Flags f;
    f.Define("snapshot-cache-bytes", "0", "");
    EXPECT_TRUE(f.Parse({"--snapshot-cache-bytes=" + v}).ok()) << v;
    return f.GetBytes("snapshot-cache-bytes");
  };
  const std::vector<std::pair<std::string, int64_t>> good = {
      {"0", 0}, {"4096", 4096}, {"3K", 3000}, {"2M", 2000000}, {"1G", 1000000000}, {"1T", 1000000000000},
      {"1Ki", 1024}, {"5Mi", 5 << 20}, {"50Gi", 50LL << 30}, {"2Ti", 2LL << 40}};
  for (const auto& [v, want] : good) {
    auto got = parsed(v);
    ASSERT_TRUE(got.ok()) << v;
    EXPECT_EQ(*got, want) << v;
  }
  for (const char* bad : {"", "-1", "1.5Gi", "10GB", "Gi", "1gi", "10 Gi", "99999999999999999Ti", "8388608Ti"}) {
    EXPECT_THAT(parsed(bad).status().message(), HasSubstr("want a size in bytes")) << bad;
  }
}

TEST(LoggingTest, AnUnknownLevelOrFormatIsAnError) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("error"), spdlog::level::err);
  for (const char* bad : {"", "verbose", "INFO", "off"}) {
    EXPECT_EQ(ParseLogLevel(bad).status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ConfigureLogging("info", "yaml").message(), HasSubstr("--log-format \"yaml\": want text or json"));
  EXPECT_THAT(ConfigureLogging("loud", "text").message(), HasSubstr("--log-level \"loud\""));
  EXPECT_TRUE(ConfigureLogging("info", "text").ok());
}

TEST(LoggingTest, AnEventsKeyValuePairsBecomeFields) {
  const auto fields = LogFields(
      "snapshot not completed actor=ns/a error=\"disk \\\"full\\\" at 99%\" action=keep_running a=b=c trailing");
  ASSERT_EQ(fields.size(), 4u);
  EXPECT_EQ(fields[0], (std::pair<std::string, std::string>{"actor", "ns/a"}));
  EXPECT_EQ(fields[1], (std::pair<std::string, std::string>{"error", "disk \"full\" at 99%"}));
  EXPECT_EQ(fields[2], (std::pair<std::string, std::string>{"action", "keep_running"}));
  EXPECT_EQ(fields[3], (std::pair<std::string, std::string>{"a", "b=c"}));
  EXPECT_TRUE(LogFields("plain words only").empty());
}

TEST(LoggingTest, AJsonLineIsOneObjectWithTimeLevelMessageAndFields) {
  const auto at = std::chrono::system_clock::time_point(std::chrono::microseconds(1796428800123456));
  const std::string text = "component=snapshots op=commit actor=default/counter level=x bytes=42 bad=\xff";
  const std::string line = JsonLogLine(at, "info", text);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2026-12-05T00:00:00.123456Z");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["component"], "snapshots");
  EXPECT_EQ(j["actor"], "default/counter");
  EXPECT_EQ(j["bytes"], "42");
  EXPECT_EQ(j["field.level"], "x") << "an event's own 'level' does not overwrite the record's";
  EXPECT_THAT(j["msg"].get<std::string>(), HasSubstr("op=commit"));
  EXPECT_EQ(j["bad"], "\xEF\xBF\xBD") << "invalid UTF-8 replaced, not thrown";
}

TEST(LoggingTest, TheJsonFormatWritesEveryEventAsOneJsonLine) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  ASSERT_TRUE(ConfigureLogging("info", "json").ok());
  spdlog::debug("not at info");
  spdlog::info("resume done actor={}/{} duration_ms={}", "default", "counter", 12);
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(ConfigureLogging("info", "text").ok());
  std::istringstream lines(out.str());
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "resume done actor=default/counter duration_ms=12");
  EXPECT_EQ(j["actor"], "default/counter");
  EXPECT_FALSE(std::getline(lines, line)) << "one line per event, the debug one filtered: " << line;
}

}  // namespace
}  // namespace stasis
