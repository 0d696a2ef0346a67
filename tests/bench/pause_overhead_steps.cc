#include "tests/bench/pause_overhead_steps.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>

namespace stasis::pause_bench {
namespace {

std::optional<double> Field(const std::string& text, const std::string& key) {
  const auto pos = text.find(" " + key + "=");
  if (pos == std::string::npos) return std::nullopt;
  try {
    return std::stod(text.substr(pos + key.size() + 2));
  } catch (...) {
    return std::nullopt;
  }
}

bool Has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

bool EndsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The first line logged at or after t0 (ms resolution: 1 ms of slack) that satisfies `pred`,
// after the line `from` when given.
class Finder {
 public:
  Finder(const std::vector<LogLine>& lines, int64_t t0) : lines_(lines), t0_(t0) {}
  const LogLine* Find(const std::function<bool(const std::string&)>& pred, const LogLine* from = nullptr) const {
    bool after = from == nullptr;
    for (const auto& l : lines_) {
      if (&l == from) {
        after = true;
        continue;
      }
      if (after && l.wall_ms >= t0_ - 1 && pred(l.text)) return &l;
    }
    return nullptr;
  }

 private:
  const std::vector<LogLine>& lines_;
  int64_t t0_;
};

double Gap(const LogLine* from, const LogLine* to) { return static_cast<double>(to->wall_ms - from->wall_ms); }

// A step inside another: its own duration_ms when its line came before `end`, else 0 (skipped).
double DurationBefore(const LogLine* step, const LogLine* end) {
  if (!step || step->wall_ms > end->wall_ms) return 0;
  return Field(step->text, "duration_ms").value_or(0);
}

}  // namespace

std::optional<int64_t> ParseSpdlogTime(const std::string& line) {
  std::tm tm{};
  int ms = 0;
  if (line.size() < 25 || line[0] != '[') return std::nullopt;
  if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const time_t t = std::mktime(&tm);
  if (t == -1) return std::nullopt;
  return static_cast<int64_t>(t) * 1000 + ms;
}

std::vector<LogLine> LogTail::Read() {
  std::vector<LogLine> out;
  std::ifstream in(path_);
  if (!in) return out;
  in.seekg(offset_);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line still being written: read it next time
    offset_ = in.tellg();
    if (auto t = ParseSpdlogTime(line)) out.push_back({*t, line});
  }
  return out;
}

// The worker is freed and the sandbox of a Direct checkpoint deleted after the PAUSED write,
// off the measured path (the last row: how long after the write the worker was free).
const StepTable kPauseSteps = {
    {"to_checkpoint", "PATCH → runsc checkpoint starts (watch event, queue, PAUSING write)"},
    {"runsc_checkpoint", "runsc checkpoint (the agent's log)"},
    {"manifest", "snapshot manifest + rename (sha256, fsync: deferred by default)"},
    {"paused_write", "status PAUSED written"},
    {"to_client", "watch event of PAUSED reaches the client"},
    {"free_worker", "off the path: worker freed, after the PAUSED write"},
};

const StepTable kResumeSteps = {
    {"watch_event", "PATCH → the agent's informer has its watch event"},
    {"queue", "work queue → a worker reconciles it"},
    {"to_restore", "reconcile → runsc restore starts (serial: the claim and RESUMING first)"},
    {"leftover_delete", "  of which: runsc delete of a leftover sandbox"},
    {"snapshot_check", "  of which: snapshot check (manifest, owner, verify)"},
    {"gpu_bundle", "  of which: a GPU actor's bundle (CDI specs read, config.json written)"},
    {"runsc_restore", "runsc restore -detach (the agent's log)"},
    {"writes", "Worker claim + RESUMING written, from the reconcile's start (overlapped: beside the restore)"},
    {"writes_after", "  of which after the restore returned (waited for)"},
    {"running_write", "restore done and both written → status RUNNING written"},
    {"to_client", "watch event of RUNNING reaches the client"},
};

std::optional<StepSplit> SplitPause(const std::vector<LogLine>& lines, const std::string& sandbox,
                                    const std::string& actor, int64_t t0, int64_t t1) {
  const Finder f(lines, t0);
  const LogLine* ck = f.Find([&](const std::string& t) {
    return Has(t, "component=runsc op=checkpoint sandbox=" + sandbox + " result=ok");
  });
  if (!ck) return std::nullopt;
  const LogLine* manifest =
      f.Find([&](const std::string& t) { return Has(t, "component=snapshots op=complete actor=" + actor + " "); }, ck);
  const LogLine* paused = f.Find([&](const std::string& t) { return Has(t, "actor checkpointed actor=" + actor + " "); }, ck);
  if (!manifest || !paused) return std::nullopt;
  const LogLine* freed =
      f.Find([&](const std::string& t) { return Has(t, "worker freed ") && Has(t, "actor=" + actor); }, paused);
  if (!freed) return std::nullopt;
  const double ck_ms = Field(ck->text, "duration_ms").value_or(0);
  StepSplit s;
  s["to_checkpoint"] = static_cast<double>(ck->wall_ms) - ck_ms - static_cast<double>(t0);
  s["runsc_checkpoint"] = ck_ms;
  s["manifest"] = Gap(ck, manifest);
  s["paused_write"] = Gap(manifest, paused);
  s["to_client"] = static_cast<double>(t1 - paused->wall_ms);
  s["free_worker"] = Gap(paused, freed);
  return s;
}

std::optional<StepSplit> SplitResume(const std::vector<LogLine>& lines, const std::string& sandbox,
                                     const std::string& actor, int64_t t0, int64_t t1) {
  const Finder f(lines, t0);
  const LogLine* event = f.Find([&](const std::string& t) {
    return Has(t, "component=informer op=event resource=actors ") && Has(t, " key=" + actor + " rv=");
  });
  if (!event) return std::nullopt;
  const LogLine* start = f.Find(
      [&](const std::string& t) { return Has(t, "component=controller op=reconcile_start ") && EndsWith(t, " key=" + actor); },
      event);
  const LogLine* claimed =
      f.Find([&](const std::string& t) { return Has(t, "worker claimed ") && EndsWith(t, " actor=" + actor); }, start);
  const LogLine* resuming = f.Find(
      [&](const std::string& t) { return Has(t, "status written actor=" + actor + " status=STATUS_RESUMING "); }, claimed);
  // With --resume-writes overlapped (the default) the restore runs while the claim and RESUMING
  // are written: its line may come before theirs. Both are looked for from the reconcile's start.
  const LogLine* restored = f.Find(
      [&](const std::string& t) { return Has(t, "component=runsc op=restore sandbox=" + sandbox + " result=ok"); },
      start);
  if (!start || !claimed || !resuming || !restored) return std::nullopt;
  const LogLine* last = resuming->wall_ms > restored->wall_ms ? resuming : restored;
  const LogLine* running = f.Find(
      [&](const std::string& t) { return Has(t, "status written actor=" + actor + " status=STATUS_RUNNING "); }, last);
  if (!running) return std::nullopt;
  const LogLine* deleted = f.Find(
      [&](const std::string& t) { return Has(t, "component=runsc op=delete sandbox=" + sandbox + " result=ok"); }, start);
  const LogLine* checked =
      f.Find([&](const std::string& t) { return Has(t, "snapshot checked for restore actor=" + actor + " "); }, start);
  const LogLine* gpu =
      f.Find([&](const std::string& t) { return Has(t, "gpu bundle prepared actor=" + actor + " "); }, start);
  const double restore_ms = Field(restored->text, "duration_ms").value_or(0);
  const double restore_start = static_cast<double>(restored->wall_ms) - restore_ms;
  StepSplit s;
  s["watch_event"] = static_cast<double>(event->wall_ms - t0);
  s["queue"] = Gap(event, start);
  s["to_restore"] = restore_start - static_cast<double>(start->wall_ms);
  s["leftover_delete"] = DurationBefore(deleted, restored);
  s["snapshot_check"] = DurationBefore(checked, restored);
  s["gpu_bundle"] = DurationBefore(gpu, restored);
  s["runsc_restore"] = restore_ms;
  s["writes"] = Gap(start, resuming);
  s["writes_after"] = std::max(0.0, static_cast<double>(resuming->wall_ms - restored->wall_ms));
  s["running_write"] = Gap(last, running);
  s["to_client"] = static_cast<double>(t1 - running->wall_ms);
  return s;
}

}  // namespace stasis::pause_bench
