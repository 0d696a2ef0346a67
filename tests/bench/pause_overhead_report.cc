#include "tests/bench/pause_overhead_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tests/bench/pause_overhead_steps.h"

namespace stasis::pause_bench {
namespace {

// The targets, same run, ratios to the runtime (docs/benchmarks.md).
constexpr double kPauseOverheadP99Ms = 100.0;
constexpr double kPauseRatio = 1.1;
constexpr double kResumeRatioP50 = 1.1;
constexpr double kResumeSlackP99Ms = 100.0;
constexpr double kSuspendRatio = 1.15;
// The fewest measured cycles a verdict is given on when the time budget ended the run early.
constexpr int kMinCycles = 5;

void PrintRow(const char* label, const std::vector<double>& v) {
  std::printf("  %-50s %9.1f %9.1f %9.1f %9.1f\n", label, Percentile(v, 50), Percentile(v, 99), Mean(v),
              v.empty() ? NAN : *std::min_element(v.begin(), v.end()));
}

const char* Verdict(bool met) { return met ? "MET" : "MISSED"; }

void PrintTable(const Config& cfg, const Samples& s) {
  const bool pause = cfg.mode == Mode::kPause;
  std::printf("\n  %-50s %9s %9s %9s %9s\n", ("milliseconds (N=" + std::to_string(s.rest_e2e.size()) + ")").c_str(), "p50",
              "p99", "mean", "min");
  PrintRow(pause ? "agent: end-to-end pause (PATCH → PAUSED)" : "agent: end-to-end suspend (PATCH → SUSPENDED)",
           s.rest_e2e);
  PrintRow("agent: runsc checkpoint (durationSeconds)", s.agent_checkpoint);
  PrintRow("agent: overhead (end-to-end − checkpoint)", s.overhead);
  PrintRow("direct: runsc checkpoint", s.direct_checkpoint);
  PrintRow("direct: runsc delete -force (after it)", s.direct_delete);
  PrintRow("direct, diagnostic: sha256 of the image", s.direct_sha256);
  PrintRow("direct, diagnostic: fsync of the image files", s.direct_fsync);
  PrintRow("direct, diagnostic: remove the previous image", s.direct_remove);
  PrintRow(pause ? "agent: end-to-end resume (PATCH → RUNNING)" : "agent: resume from the store (PATCH → RUNNING)",
           s.resume_e2e);
  PrintRow("agent: resume overhead (end-to-end − restore)", s.resume_overhead);
  PrintRow("direct: runsc restore -detach", s.direct_restore);
  if (cfg.peer_object_store) {
    PrintRow("peer: curl upload of the direct image", s.peer_upload);
    PrintRow("peer: curl download of it (before the restore)", s.peer_download);
    PrintRow("peer: checkpoint + upload (a suspend's baseline)", s.peer_suspend);
    PrintRow("peer: download + restore (a resume's baseline)", s.peer_resume);
  }
  if (cfg.leave_running_side) {
    PrintRow("leave-running: end-to-end pause or suspend", s.lr_rest_e2e);
    PrintRow("leave-running: checkpoint -leave-running", s.lr_checkpoint);
    PrintRow("leave-running: end-to-end resume", s.lr_resume_e2e);
  }
}

void PrintSteps(const char* what, const StepTable& table, const std::map<std::string, std::vector<double>>& steps,
                int cycles) {
  const auto first = steps.find(table.front().first);
  if (first == steps.end()) {
    std::printf("\n  no %s could be split into steps (run the agent at --log-level debug)\n", what);
    return;
  }
  std::printf("\n  where a %s goes (agent log, ms resolution; %zu of %d split)\n", what, first->second.size(), cycles);
  std::printf("  %-72s %7s %7s %7s\n", "step", "p50", "p99", "mean");
  for (const auto& [key, label] : table) {
    const auto it = steps.find(key);
    const std::vector<double> none;
    const auto& v = it == steps.end() ? none : it->second;
    std::printf("  %-72s %7.1f %7.1f %7.1f\n", label.c_str(), Percentile(v, 50), Percentile(v, 99), Mean(v));
  }
}

void PrintRatios(const Config& cfg, const Samples& s) {
  const char* what = cfg.mode == Mode::kPause ? "pause" : "suspend";
  std::printf("\n  ratio end-to-end %s / direct checkpoint: p50 %.3f, p99 %.3f\n", what,
              Percentile(s.rest_e2e, 50) / Percentile(s.direct_checkpoint, 50),
              Percentile(s.rest_e2e, 99) / Percentile(s.direct_checkpoint, 99));
  std::printf("  ratio agent checkpoint / direct checkpoint (same work, should be ~1): p50 %.3f\n",
              Percentile(s.agent_checkpoint, 50) / Percentile(s.direct_checkpoint, 50));
  std::printf("  ratio end-to-end resume / direct restore: p50 %.3f, p99 %.3f (p99 %+.1f ms)\n",
              Percentile(s.resume_e2e, 50) / Percentile(s.direct_restore, 50),
              Percentile(s.resume_e2e, 99) / Percentile(s.direct_restore, 99),
              Percentile(s.resume_e2e, 99) - Percentile(s.direct_restore, 99));
  if (cfg.leave_running_side) {
    std::printf("  LeaveRunningThenStop / Direct (same agent, same bundle): end-to-end %s p50 %.3f, p99 %.3f; "
                "checkpoint p50 %.3f\n",
                what, Percentile(s.lr_rest_e2e, 50) / Percentile(s.rest_e2e, 50),
                Percentile(s.lr_rest_e2e, 99) / Percentile(s.rest_e2e, 99),
                Percentile(s.lr_checkpoint, 50) / Percentile(s.agent_checkpoint, 50));
  }
  std::printf("  checkpoint image, p50: agent %.0f bytes, direct %.0f bytes\n", Percentile(s.agent_image, 50),
              Percentile(s.direct_image, 50));
}

void PrintTargets(const Config& cfg, const Samples& s) {
  const double resume50 = Percentile(s.resume_e2e, 50) / Percentile(s.direct_restore, 50);
  const double resume_slack99 = Percentile(s.resume_e2e, 99) - Percentile(s.direct_restore, 99);
  const double rest50 = Percentile(s.rest_e2e, 50) / Percentile(s.direct_checkpoint, 50);
  const double rest99 = Percentile(s.rest_e2e, 99) / Percentile(s.direct_checkpoint, 99);
  std::printf("\n");
  if (cfg.mode == Mode::kPause) {
    const double overhead99 = Percentile(s.overhead, 99);
    std::printf("  target overhead p99 <= %.0f ms: %s (%.1f ms)\n", kPauseOverheadP99Ms,
                Verdict(overhead99 <= kPauseOverheadP99Ms), overhead99);
    std::printf("  target ratio <= %.2f (p50 and p99): %s (p50 %.3f, p99 %.3f)\n", kPauseRatio,
                Verdict(rest50 <= kPauseRatio && rest99 <= kPauseRatio), rest50, rest99);
    std::printf("  target resume <= %.2fx direct restore p50: %s (%.3f)\n", kResumeRatioP50,
                Verdict(resume50 <= kResumeRatioP50), resume50);
    std::printf("  target resume p99 <= direct restore p99 + %.0f ms: %s (%+.1f ms)\n", kResumeSlackP99Ms,
                Verdict(resume_slack99 <= kResumeSlackP99Ms), resume_slack99);
    return;
  }
  if (cfg.peer_object_store) {
    const double suspend50 = Percentile(s.rest_e2e, 50) / Percentile(s.peer_suspend, 50);
    const double store_resume50 = Percentile(s.resume_e2e, 50) / Percentile(s.peer_resume, 50);
    std::printf("  target suspend <= %.2fx (checkpoint + peer upload) p50: %s (%.3f)\n", kSuspendRatio,
                Verdict(suspend50 <= kSuspendRatio), suspend50);
    std::printf("  target resume from the store <= %.2fx (peer download + restore) p50: %s (%.3f)\n",
                kSuspendRatio, Verdict(store_resume50 <= kSuspendRatio), store_resume50);
    return;
  }
  std::printf("  target suspend <= %.2fx direct checkpoint p50: %s (p50 %.3f, p99 %.3f)\n", kSuspendRatio,
              Verdict(rest50 <= kSuspendRatio), rest50, rest99);
  // A resume from the store verifies the committed image first: no target of its own here.
  std::printf("  resume from the store / direct restore, no target: p50 %.3f, p99 %+.1f ms\n", resume50,
              resume_slack99);
}

}  // namespace

void Die(const std::string& what) {
  std::fprintf(stderr, "pause_overhead: %s\n", what.c_str());
  std::exit(1);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

int PrintReport(const Config& cfg, const Samples& s, bool have_log, int measured) {
  PrintTable(cfg, s);
  PrintRatios(cfg, s);
  if (have_log) {
    if (cfg.mode == Mode::kPause) PrintSteps("pause", kPauseSteps, s.pause_steps, measured);
    PrintSteps("resume", kResumeSteps, s.resume_steps, measured);
  }
  // No verdict from samples that are not all there (an empty one reads as 0 ms: "met"), nor
  // from a run that the time budget cut to fewer than kMinCycles.
  const size_t want = static_cast<size_t>(std::max(measured, 0));
  if (measured < std::min(cfg.cycles, kMinCycles) || s.rest_e2e.size() != want || s.direct_checkpoint.size() != want || s.overhead.size() != want ||
      s.resume_e2e.size() != want || s.direct_restore.size() != want) {
    std::printf("\n  no verdict: %zu agent cycles and %zu direct cycles measured, not %zu\n", s.rest_e2e.size(),
                s.direct_checkpoint.size(), want);
    return 1;
  }
  PrintTargets(cfg, s);
  return 0;
}

}  // namespace stasis::pause_bench
