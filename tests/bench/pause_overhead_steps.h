// The agent's log (at --log-level debug), split into the steps of one pause or one resume: each
// step is the time between two of the agent's structured lines (ms resolution), or a line's own
// duration_ms.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stasis::pause_bench {

struct LogLine {
  int64_t wall_ms = 0;  // the line's timestamp
  std::string text;
};

// "[2026-01-02 15:04:05.123] [info] …": spdlog's default pattern, local time.
std::optional<int64_t> ParseSpdlogTime(const std::string& line);

// Reads the lines the agent appended since the last call.
class LogTail {
 public:
  explicit LogTail(std::string path) : path_(std::move(path)) {}
  void Skip() { Read(); }
  std::vector<LogLine> Read();

 private:
  std::string path_;
  int64_t offset_ = 0;
};

using StepTable = std::vector<std::pair<std::string, std::string>>;  // key, label: report order
using StepSplit = std::map<std::string, double>;                     // key → milliseconds

// The steps of one pause, in the agent's order (actor_reconciler.cc).
extern const StepTable kPauseSteps;
// The steps of one resume, in the agent's order (resume.cc).
extern const StepTable kResumeSteps;

// Splits one transition using the lines logged between t0 (just before the PATCH) and t1 (the
// client saw the status), or nothing when a step's line is missing (a retried reconcile, an
// unexpected log format). `sandbox`: the actor's sandbox id; `actor`: "<namespace>/<name>".
std::optional<StepSplit> SplitPause(const std::vector<LogLine>& lines, const std::string& sandbox,
                                    const std::string& actor, int64_t t0, int64_t t1);
std::optional<StepSplit> SplitResume(const std::vector<LogLine>& lines, const std::string& sandbox,
                                     const std::string& actor, int64_t t0, int64_t t1);

}  // namespace stasis::pause_bench
