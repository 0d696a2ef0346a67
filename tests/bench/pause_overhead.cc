// Benchmark of issue 5: the node agent's overhead on a pause of a real sandbox.
//
// For each of N cycles it patches a pinned Actor's desiredState to Paused (t0 just before the
// PATCH), watches the actor from the PATCH response's resourceVersion until status.status is
// STATUS_PAUSED (t1), and takes the agent's own measure of the `runsc checkpoint` from
// status.latestSnapshot.durationSeconds: overhead = (t1 − t0) − checkpoint. It then patches
// Running and waits for STATUS_RUNNING (measured separately, as the resume).
//
// The baseline runs in the same process and the same run, interleaved with the agent cycles
// (in a rotating order: the machine is shared and noisy, so noise must hit every side alike): a
// second sandbox of the same bundle, started directly with runsc in its own -root, and for
// each cycle `runsc checkpoint -image-path <fresh dir>` (timed), `runsc delete -force`,
// `runsc restore -detach` (timed, as the resume's baseline). The direct side also times, as
// diagnostics outside the baseline, what the agent does after a checkpoint on the same image
// (delete, sha256, fsync, removal of the previous image).
//
// A third side, in the same rotation: a second actor of the same bundle on the same agent with
// spec.checkpointPolicy LeaveRunningThenStop, paused and resumed like the first; its figures
// are reported as ratios to the Direct actor's (the extra cost of that policy).
//
// With --agent-log (the agent at --log-level debug), each pause is also split into its steps
// from the agent's log lines (their timestamps and duration_ms), to say what the overhead is.
//
// With --gpu-uuid, both sides are live CUDA workloads on that GPU (hack/gpu-e2e.sh's pause
// benchmark mode, on the GPU machine): the actor asks for one GPU (the agent adds it and the
// cuda-checkpoint helper from the node's CDI specs), and the direct sandbox runs from a bundle
// written by the agent's own code for the same CDI devices (WriteGpuBundle), checkpointed
// with the same -cuda-checkpoint-path. The LeaveRunningThenStop side needs a second worker and
// is left out there (--leave-running-side=false): one GPU is one worker.
//
// hack/bench/pause-overhead.sh brings up the control plane and the agent and runs this.
// Exit status: 0 when the benchmark ran (targets met or not), 1 on any error.
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/names.h"
#include "cmd/stasis/flags.h"
#include "controller/kube_client.h"
#include "controller/rest_config.h"
#include "controller/transport.h"
#include "reconcilers/api_resources.h"
#include "runtimes/gpu/cdi.h"
#include "runtimes/gpu/gpu_bundle.h"
#include "base/subprocess.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int64_t WallMs(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "pause_overhead: %s\n", what.c_str());
  std::exit(1);
}

// Nearest-rank percentile (with N = 50, p99 is the maximum).
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

struct Config {
  std::string kubeconfig, runsc, bundle, node, ns, name, work_dir, agent_log, csv;
  std::vector<std::string> runsc_flags;
  // A GPU run: the GPU both sides use, the node's CDI spec directories, the helper's path in
  // the container. Empty gpu_uuid: no GPU.
  std::string gpu_uuid, gpu_cdi_kind, cuda_checkpoint_path;
  std::vector<std::string> cdi_spec_dirs;
  bool leave_running_side = true;
  int cycles = 50;
  int warmup = 2;
  std::chrono::milliseconds settle{1000};
};

// ---------------------------------------------------------------------------------------------
// The agent side: an Actor driven through the API server.

class ActorDriver {
 public:
  // `policy`: the actor's spec.checkpointPolicy ("Direct" or "LeaveRunningThenStop").
  ActorDriver(const Config& cfg, KubeClient& client, std::string name, std::string policy)
      : cfg_(cfg), client_(client), name_(std::move(name)), policy_(std::move(policy)) {}

  const std::string& name() const { return name_; }

  void Create() {
    json actor = {{"apiVersion", api::kApiVersion},
                  {"kind", api::kActorKind},
                  {"metadata", {{"name", name_}, {"namespace", cfg_.ns}}},
                  {"spec",
                   {{"bundle", cfg_.bundle}, {"nodeName", cfg_.node}, {"desiredState", "Running"},
                    {"checkpointPolicy", policy_}}}};
    if (!cfg_.gpu_uuid.empty()) {
      actor["spec"]["gpu"] = {{"count", 1}, {"cudaCheckpointPath", cfg_.cuda_checkpoint_path}};
      actor["spec"]["timeouts"] = {{"checkpointSeconds", 300}, {"restoreSeconds", 300}};
    }
    auto r = client_.Create(kActorType, cfg_.ns, actor);
    if (!r.ok()) Die("create actor: " + r.status().ToString());
    auto running = WaitFor((*r)["metadata"]["resourceVersion"].get<std::string>(), "STATUS_RUNNING");
    if (!running.ok()) Die("actor never ran: " + running.status().ToString());
  }

  struct Transition {
    double e2e_ms = 0;
    double checkpoint_ms = 0;  // status.latestSnapshot.durationSeconds, for a pause
    double image_bytes = 0;    // status.latestSnapshot.sizeBytes, for a pause
    int64_t t0_wall_ms = 0, t1_wall_ms = 0;
  };

  // Patches desiredState and waits for the status it leads to; the latency from just before the
  // PATCH to the watch event that shows the status.
  Result<Transition> Drive(const std::string& desired, const std::string& want) {
    Transition t;
    const auto wall0 = WallClock::now();
    const auto t0 = SteadyClock::now();
    auto patched = client_.Patch(kActorType, cfg_.ns, name_, PatchType::kMerge,
                                 {{"spec", {{"desiredState", desired}}}});
    if (!patched.ok()) return patched.status();
    auto done = WaitFor((*patched)["metadata"]["resourceVersion"].get<std::string>(), want);
    if (!done.ok()) return done.status();
    t.e2e_ms = Ms(done->at - t0);
    t.t0_wall_ms = WallMs(wall0);
    t.t1_wall_ms = WallMs(done->wall);
    if (want == "STATUS_PAUSED") {
      const json& snap = done->object["status"]["latestSnapshot"];
      if (!snap.contains("durationSeconds")) {
        return Status(Code::kInternal, "PAUSED without latestSnapshot.durationSeconds");
      }
      t.checkpoint_ms = snap["durationSeconds"].get<double>() * 1000.0;
      t.image_bytes = snap.value("sizeBytes", 0.0);
    }
    return t;
  }

  void Delete() {
    if (Status s = client_.Delete(kActorType, cfg_.ns, name_); !s.ok()) {
      std::fprintf(stderr, "pause_overhead: delete actor: %s\n", s.ToString().c_str());
      return;
    }
    // The agent's finalizer removes the sandbox and the snapshots before the object goes.
    const auto deadline = SteadyClock::now() + 120s;
    while (SteadyClock::now() < deadline) {
      auto r = client_.Get(kActorType, cfg_.ns, name_);
      if (!r.ok() && r.status().code() == Code::kNotFound) return;
      std::this_thread::sleep_for(100ms);
    }
    std::fprintf(stderr, "pause_overhead: actor %s/%s still there after 120 s\n", cfg_.ns.c_str(),
                 name_.c_str());
  }

 private:
  struct Seen {
    json object;
    SteadyClock::time_point at;
    WallClock::time_point wall;
  };

  // Watches the actor from `rv` until status.status == want for the current generation.
  // A status the transition cannot lead to (FAILED, or SUSPENDED while pausing) is an error.
  Result<Seen> WaitFor(std::string rv, const std::string& want) {
    const auto deadline = SteadyClock::now() + 300s;
    std::optional<Seen> found;
    Status failure;
    auto check = [&](const json& obj) {
      const json& st = obj.value("status", json::object());
      const std::string status = st.value("status", "");
      const bool current = st.value("observedGeneration", int64_t{-1}) ==
                           obj["metadata"].value("generation", int64_t{0});
      if (!current) return false;
      if (status == want) {
        found = Seen{obj, SteadyClock::now(), WallClock::now()};
        return true;
      }
      if (status == "STATUS_FAILED" || (want == "STATUS_PAUSED" && status == "STATUS_SUSPENDED")) {
        failure = Status(Code::kInternal, "actor went to " + status + ": " + st.dump());
        return true;
      }
      return false;
    };
    while (SteadyClock::now() < deadline) {
      WatchOptions wo;
      wo.resource_version = rv;
      wo.field_selector = "metadata.name=" + name_;
      wo.timeout_seconds = 60;
      Status s = client_.Watch(
          kActorType, cfg_.ns, wo,
          [&](const json& event) {
            const json& obj = event["object"];
            if (obj.contains("metadata") && obj["metadata"].contains("resourceVersion")) {
              rv = obj["metadata"]["resourceVersion"].get<std::string>();
            }
            if (event.value("type", "") == "BOOKMARK") return true;
            return !check(obj);
          },
          nullptr);
      if (found) return *found;
      if (!failure.ok()) return failure;
      if (!s.ok() && s.code() != Code::kGone && s.code() != Code::kDeadlineExceeded &&
          s.code() != Code::kUnavailable) {
        return s;
      }
      // The watch ended (timeout, 410): look once, then watch again from what was read.
      auto now = client_.Get(kActorType, cfg_.ns, name_);
      if (!now.ok()) return now.status();
      rv = (*now)["metadata"]["resourceVersion"].get<std::string>();
      if (check(*now)) {
        if (found) return *found;
        return failure;
      }
    }
    return Status(Code::kDeadlineExceeded, "actor did not reach " + want + " within 300 s");
  }

  const Config& cfg_;
  KubeClient& client_;
  std::string name_, policy_;
};

// ---------------------------------------------------------------------------------------------
// The baseline: the same bundle run directly with runsc, in its own root.

class DirectSandbox {
 public:
  explicit DirectSandbox(const Config& cfg)
      : cfg_(cfg), root_(fs::path(cfg.work_dir) / "direct-root"),
        images_(fs::path(cfg.work_dir) / "direct-images") {
    fs::create_directories(root_);
    fs::create_directories(images_);
  }

  void Start() {
    bundle_ = cfg_.bundle;
    if (!cfg_.gpu_uuid.empty()) {
      // The same devices, libraries and helper mount the agent gives its actor, by its code.
      auto cdi = CdiRegistry::Load(cfg_.cdi_spec_dirs);
      if (!cdi.ok()) Die("direct GPU bundle: " + cdi.status().ToString());
      GpuBundleRequest request;
      request.source_bundle = cfg_.bundle;
      request.out_dir = (fs::path(cfg_.work_dir) / "direct-bundle").string();
      request.gpu_uuids = {cfg_.gpu_uuid};
      request.gpu_kind = cfg_.gpu_cdi_kind;
      request.cuda_checkpoint_path = cfg_.cuda_checkpoint_path;
      auto written = WriteGpuBundle(*cdi, request);
      if (!written.ok()) Die("direct GPU bundle: " + written.status().ToString());
      bundle_ = *written;
    }
    auto r = Runsc({"run", "-detach", "-bundle", bundle_, kId});
    if (!r.success()) Die("direct runsc run: " + r.Summary());
    started_ = true;
  }

  struct Cycle {
    double checkpoint_ms = 0;
    double delete_ms = 0;
    double restore_ms = 0;
    double image_bytes = 0;
    // Diagnostics, not part of the baseline: what the agent's extra steps cost on this image.
    double sha256_ms = 0;   // sha256 of every image file (the manifest's hashing)
    double fsync_ms = 0;    // fsync of every image file (the manifest's durability)
    double remove_ms = 0;   // removing the previous image (the agent drops superseded snapshots)
  };

  // checkpoint (timed: the baseline) → delete -force → restore -detach (timed) from the new
  // image. Between them, as diagnostics of what the agent adds, the agent's own post-checkpoint
  // work is timed on this image the way the agent does it: sha256 and fsync of every file, and the
  // removal of the previous image (the agent drops superseded snapshots).
  Result<Cycle> Run() {
    Cycle c;
    const fs::path image = images_ / std::to_string(++seq_);
    fs::create_directories(image);
    auto start = SteadyClock::now();
    std::vector<std::string> ck_args = {"checkpoint", "-image-path", image.string()};
    if (!cfg_.gpu_uuid.empty()) {
      ck_args.push_back("-cuda-checkpoint-path");
      ck_args.push_back(cfg_.cuda_checkpoint_path);
    }
    ck_args.push_back(kId);
    auto ck = Runsc(ck_args);
    c.checkpoint_ms = Ms(SteadyClock::now() - start);
    if (!ck.success()) return Status(Code::kInternal, "direct runsc checkpoint: " + ck.Summary());
    // The agent's order after a checkpoint: delete, manifest (hash, fsync), drop the old image.
    start = SteadyClock::now();
    auto del = Runsc({"delete", "-force", kId});
    c.delete_ms = Ms(SteadyClock::now() - start);
    if (!del.success()) return Status(Code::kInternal, "direct runsc delete: " + del.Summary());
    std::error_code ec;
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(image, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      c.image_bytes += static_cast<double>(it->file_size(ec));
      files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    c.sha256_ms = TimeSha256(files);
    c.fsync_ms = TimeFsync(files);
    start = SteadyClock::now();
    if (!last_image_.empty()) fs::remove_all(last_image_, ec);
    c.remove_ms = Ms(SteadyClock::now() - start);
    last_image_ = image;
    start = SteadyClock::now();
    auto rs = Runsc({"restore", "-detach", "-image-path", image.string(), "-bundle", bundle_, kId});
    c.restore_ms = Ms(SteadyClock::now() - start);
    if (!rs.success()) return Status(Code::kInternal, "direct runsc restore: " + rs.Summary());
    return c;
  }

  // Deletes the sandbox and releases the root's null-netns bind mount (runsc leaves it
  // mounted with -network=none), so that the work directory can be removed.
  void Stop() {
    if (started_) Runsc({"delete", "-force", kId});
    started_ = false;
    const fs::path netns = root_ / "null-netns";
    std::error_code ec;
    if (fs::exists(netns, ec)) {
      (void)RunCommand({"umount", "-l", netns.string()}, 30s);
    }
    fs::remove_all(images_, ec);
  }

 private:
  static constexpr const char* kId = "bench-direct";

  // sha256 of every file, as the agent's manifest hashes them (OpenSSL EVP, 1 MiB reads).
  static double TimeSha256(const std::vector<std::string>& files) {
    const auto start = SteadyClock::now();
    std::vector<unsigned char> buf(1 << 20);
    for (const auto& f : files) {
      const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return NAN;
      EVP_MD_CTX* ctx = EVP_MD_CTX_new();
      EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
      ssize_t n;
      while ((n = read(fd, buf.data(), buf.size())) > 0) {
        EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
      }
      unsigned char md[EVP_MAX_MD_SIZE];
      unsigned int len = 0;
      EVP_DigestFinal_ex(ctx, md, &len);
      EVP_MD_CTX_free(ctx);
      close(fd);
      if (n < 0) return NAN;
    }
    return Ms(SteadyClock::now() - start);
  }

  // fsync of every file, as the agent's manifest syncs them.
  static double TimeFsync(const std::vector<std::string>& files) {
    const auto start = SteadyClock::now();
    for (const auto& f : files) {
      const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return NAN;
      const int r = fsync(fd);
      close(fd);
      if (r != 0) return NAN;
    }
    return Ms(SteadyClock::now() - start);
  }

  // Runs runsc exactly as the agent's driver does (runsc_driver.cc): stdout and stderr to
  // pipes, except for run and restore, whose detached sandbox keeps the container's stdio (a
  // file, never a pipe of ours).
  CommandResult Runsc(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {cfg_.runsc, "-root", root_.string()};
    argv.insert(argv.end(), cfg_.runsc_flags.begin(), cfg_.runsc_flags.end());
    argv.insert(argv.end(), args.begin(), args.end());
    CommandOptions o;
    if (args[0] == "run" || args[0] == "restore") {
      o.output_path = (root_ / "runsc-output.log").string();
    }
    auto r = RunCommand(argv, 150s, o);
    if (!r.ok()) {
      CommandResult failed;
      failed.err = r.status().ToString();
      return failed;
    }
    return *r;
  }

  const Config& cfg_;
  std::string bundle_;  // cfg_.bundle, or the GPU bundle written from it
  fs::path root_, images_, last_image_;
  int seq_ = 0;
  bool started_ = false;
};

// ---------------------------------------------------------------------------------------------
// The agent's log, split into the steps of one pause.

struct LogLine {
  int64_t wall_ms = 0;  // the line's timestamp
  std::string text;
};

// "[2026-01-02 15:04:05.123] [info] …": spdlog's default pattern, local time.
std::optional<int64_t> ParseSpdlogTime(const std::string& line) {
  std::tm tm{};
  int ms = 0;
  if (line.size() < 25 || line[0] != '[') return std::nullopt;
  if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const time_t t = std::mktime(&tm);
  if (t == -1) return std::nullopt;
  return static_cast<int64_t>(t) * 1000 + ms;
}

std::optional<double> Field(const std::string& text, const std::string& key) {
  const auto pos = text.find(" " + key + "=");
  if (pos == std::string::npos) return std::nullopt;
  try {
    return std::stod(text.substr(pos + key.size() + 2));
  } catch (...) {
    return std::nullopt;
  }
}

bool Has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Reads the lines the agent appended since the last call.
class LogTail {
 public:
  explicit LogTail(std::string path) : path_(std::move(path)) {}
  void Skip() { Read(); }
  std::vector<LogLine> Read() {
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

 private:
  std::string path_;
  std::streamoff offset_ = 0;
};

// The steps of one pause, in milliseconds, in the agent's order (actor_reconciler.cc). The
// worker is freed and the sandbox of a Direct checkpoint deleted after the PAUSED write, off
// the measured path (the last row: how long after the write the worker was free).
const std::vector<std::pair<std::string, std::string>> kSteps = {
    {"to_checkpoint", "PATCH → runsc checkpoint starts (watch event, queue, PAUSING write)"},
    {"runsc_checkpoint", "runsc checkpoint (the agent's log)"},
    {"manifest", "snapshot manifest + rename (sha256, fsync: deferred by default)"},
    {"paused_write", "status PAUSED written"},
    {"to_client", "watch event of PAUSED reaches the client"},
    {"free_worker", "off the path: worker freed, after the PAUSED write"},
};

// Splits one pause using the lines logged between t0 and t1, or nothing when a step's line is
// missing (a retried reconcile, an unexpected log format).
std::optional<std::map<std::string, double>> SplitPause(const std::vector<LogLine>& lines,
                                                        const std::string& sandbox,
                                                        const std::string& actor, int64_t t0,
                                                        int64_t t1) {
  // The first line after `from` (or after t0) that satisfies pred.
  auto find = [&](const std::function<bool(const std::string&)>& pred,
                  const LogLine* from = nullptr) -> const LogLine* {
    bool after = from == nullptr;
    for (const auto& l : lines) {
      if (&l == from) {
        after = true;
        continue;
      }
      if (after && l.wall_ms >= t0 - 1 && pred(l.text)) return &l;
    }
    return nullptr;
  };
  const LogLine* ck = find([&](const std::string& t) {
    return Has(t, "component=runsc op=checkpoint sandbox=" + sandbox + " result=ok");
  });
  if (!ck) return std::nullopt;
  const LogLine* manifest = find([&](const std::string& t) {
    return Has(t, "component=snapshots op=complete actor=" + actor + " ");
  }, ck);
  const LogLine* paused = find([&](const std::string& t) {
    return Has(t, "actor checkpointed actor=" + actor + " ");
  }, ck);
  if (!manifest || !paused) return std::nullopt;
  const LogLine* freed = find([&](const std::string& t) {
    return Has(t, "worker freed ") && Has(t, "actor=" + actor);
  }, paused);
  if (!freed) return std::nullopt;
  const double ck_ms = Field(ck->text, "duration_ms").value_or(0);
  const double ck_start = static_cast<double>(ck->wall_ms) - ck_ms;
  std::map<std::string, double> s;
  s["to_checkpoint"] = ck_start - static_cast<double>(t0);
  s["runsc_checkpoint"] = ck_ms;
  s["manifest"] = static_cast<double>(manifest->wall_ms - ck->wall_ms);
  s["paused_write"] = static_cast<double>(paused->wall_ms - manifest->wall_ms);
  s["to_client"] = static_cast<double>(t1 - paused->wall_ms);
  s["free_worker"] = static_cast<double>(freed->wall_ms - paused->wall_ms);
  return s;
}

// ---------------------------------------------------------------------------------------------

struct Samples {
  std::vector<double> pause_e2e, agent_checkpoint, overhead, direct_checkpoint;
  std::vector<double> resume_e2e, direct_restore, direct_delete;
  std::vector<double> direct_sha256, direct_fsync, direct_remove;
  std::vector<double> agent_image, direct_image;
  // The same agent pausing a second actor of the same bundle with checkpointPolicy
  // LeaveRunningThenStop (checkpoint -leave-running, then delete -force before the worker goes).
  std::vector<double> lr_pause_e2e, lr_checkpoint, lr_resume_e2e;
  std::map<std::string, std::vector<double>> steps;
};

void PrintRow(const char* label, const std::vector<double>& v) {
  std::printf("  %-46s %9.1f %9.1f %9.1f %9.1f\n", label, Percentile(v, 50), Percentile(v, 99),
              Mean(v), v.empty() ? NAN : *std::min_element(v.begin(), v.end()));
}

Config ParseFlags(int argc, char** argv) {
  Flags f;
  f.Define("kubeconfig", "", "admin kubeconfig of the control plane (default $KUBECONFIG)");
  f.Define("runsc", "", "the runsc binary the agent uses (hack/runsc.sh prints it)");
  f.Define("runsc-flags", "-network=none", "global runsc flags, as the agent's --runsc-flags");
  f.Define("bundle", "", "the OCI bundle of both sandboxes (hack/make-bundle.sh)");
  f.Define("node", "", "the node agent's --node-name (the actor is pinned to it)");
  f.Define("namespace", "default", "the actor's namespace");
  f.Define("name", "bench-pause", "the actor's name");
  f.Define("work-dir", "", "scratch directory for the direct sandbox's root and images");
  f.Define("cycles", "50", "measured pause/resume cycles of each side");
  f.Define("warmup", "2", "unmeasured cycles of each side first");
  f.Define("settle", "1s",
           "unmeasured wait after each resume and each direct restore, before the next checkpoint");
  f.Define("agent-log", "", "the agent's log (at --log-level debug): split each pause into steps");
  f.Define("csv", "", "write every cycle's figures to this file");
  f.Define("gpu-uuid", "", "a GPU run: the UUID of the GPU both sides use (the agent's worker's)");
  f.Define("cdi-spec-dirs", "/etc/cdi,/var/run/cdi", "a GPU run: the node's CDI specs, as the agent's flag");
  f.Define("gpu-cdi-kind", "nvidia.com/gpu", "a GPU run: the CDI kind of the node's GPUs");
  f.Define("cuda-checkpoint-path", "/opt/stasis/cuda-checkpoint",
           "a GPU run: the helper's path inside the container (spec.gpu.cudaCheckpointPath)");
  f.Define("leave-running-side", "true",
           "also pause a LeaveRunningThenStop actor (needs a second worker)");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (Status s = f.Parse(args); !s.ok()) Die(s.ToString());
  if (f.help_requested()) {
    std::printf("Usage: bench_pause_overhead [flags]\n\n%s", f.Usage().c_str());
    std::exit(0);
  }
  Config c;
  c.kubeconfig = f.Get("kubeconfig");
  if (c.kubeconfig.empty() && std::getenv("KUBECONFIG")) c.kubeconfig = std::getenv("KUBECONFIG");
  c.runsc = f.Get("runsc");
  std::istringstream flags(f.Get("runsc-flags"));
  for (std::string w; flags >> w;) c.runsc_flags.push_back(w);
  c.bundle = f.Get("bundle");
  c.node = f.Get("node");
  c.ns = f.Get("namespace");
  c.name = f.Get("name");
  c.work_dir = f.Get("work-dir");
  c.agent_log = f.Get("agent-log");
  c.csv = f.Get("csv");
  c.gpu_uuid = f.Get("gpu-uuid");
  c.gpu_cdi_kind = f.Get("gpu-cdi-kind");
  c.cuda_checkpoint_path = f.Get("cuda-checkpoint-path");
  std::istringstream dirs(f.Get("cdi-spec-dirs"));
  for (std::string d; std::getline(dirs, d, ',');) {
    if (!d.empty()) c.cdi_spec_dirs.push_back(d);
  }
  c.leave_running_side = f.GetBool("leave-running-side");
  auto cycles = f.GetInt("cycles", 1, 100000);
  auto warmup = f.GetInt("warmup", 0, 1000);
  if (!cycles.ok()) Die(cycles.status().ToString());
  if (!warmup.ok()) Die(warmup.status().ToString());
  auto settle = f.GetSeconds("settle");
  if (!settle.ok()) Die(settle.status().ToString());
  c.settle = std::chrono::milliseconds(static_cast<int64_t>(*settle * 1000));
  c.cycles = *cycles;
  c.warmup = *warmup;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"kubeconfig", c.kubeconfig}, {"runsc", c.runsc}, {"bundle", c.bundle},
           {"node", c.node}, {"work-dir", c.work_dir}}) {
    if (value.empty()) Die("--" + flag + " is required");
  }
  return c;
}

std::string RunscVersion(const std::string& runsc) {
  auto r = RunCommand({runsc, "--version"}, 30s);
  if (!r.ok() || !r->success()) return "unknown";
  std::string first = r->out.substr(0, r->out.find('\n'));
  return first;
}

int Main(int argc, char** argv) {
  const Config cfg = ParseFlags(argc, argv);
  auto rest = LoadKubeconfig(cfg.kubeconfig);
  if (!rest.ok()) Die(rest.status().ToString());
  KubeClient client(NewCpprestTransport(*rest));

  ActorDriver agent(cfg, client, cfg.name, "Direct");
  ActorDriver leave_running(cfg, client, cfg.name + "-lr", "LeaveRunningThenStop");
  DirectSandbox direct(cfg);
  std::optional<LogTail> log;
  if (!cfg.agent_log.empty()) log.emplace(cfg.agent_log);
  const std::string sandbox = SandboxIdFor(cfg.ns, cfg.name);
  const std::string actor = cfg.ns + "/" + cfg.name;

  std::printf(
      "pause overhead: %d cycles per side, %d sides rotated, %d warm-up cycles, %lld ms settle\n",
      cfg.cycles, cfg.leave_running_side ? 3 : 2, cfg.warmup,
      static_cast<long long>(cfg.settle.count()));
  std::printf("  %s; bundle %s; node %s; host cores %u\n", RunscVersion(cfg.runsc).c_str(),
              cfg.bundle.c_str(), cfg.node.c_str(), std::thread::hardware_concurrency());
  if (!cfg.gpu_uuid.empty()) {
    std::printf("  GPU run: both sides on %s, checkpointed with -cuda-checkpoint-path %s\n",
                cfg.gpu_uuid.c_str(), cfg.cuda_checkpoint_path.c_str());
  }
  std::fflush(stdout);

  agent.Create();
  if (cfg.leave_running_side) leave_running.Create();
  direct.Start();

  Samples s;
  std::ofstream csv;
  if (!cfg.csv.empty()) {
    csv.open(cfg.csv);
    csv << "cycle,order,pause_e2e_ms,agent_checkpoint_ms,overhead_ms,direct_checkpoint_ms,"
           "direct_delete_ms,resume_e2e_ms,direct_restore_ms,lr_pause_e2e_ms,lr_checkpoint_ms,"
           "agent_image_bytes,lr_image_bytes\n";
  }
  for (int i = 0; i < cfg.warmup + cfg.cycles; ++i) {
    const bool measured = i >= cfg.warmup;
    ActorDriver::Transition pause, resume;
    DirectSandbox::Cycle base;
    auto run_agent = [&] {
      if (log) log->Skip();
      auto p = agent.Drive("Paused", "STATUS_PAUSED");
      if (!p.ok()) Die("agent pause, cycle " + std::to_string(i) + ": " + p.status().ToString());
      pause = *p;
      if (log && measured) {
        // The agent logs its last line of the pause just after the PAUSED write, which the
        // client may see first: give the log a moment (unmeasured, before the resume).
        std::vector<LogLine> lines;
        for (int attempt = 0; attempt < 40; ++attempt) {
          auto more = log->Read();
          lines.insert(lines.end(), more.begin(), more.end());
          auto split = SplitPause(lines, sandbox, actor, pause.t0_wall_ms, pause.t1_wall_ms);
          if (split) {
            for (const auto& [k, v] : *split) s.steps[k].push_back(v);
            break;
          }
          std::this_thread::sleep_for(25ms);
        }
      }
      auto r = agent.Drive("Running", "STATUS_RUNNING");
      if (!r.ok()) Die("agent resume, cycle " + std::to_string(i) + ": " + r.status().ToString());
      resume = *r;
      // The agent reacts to its own RUNNING write (a liveness reconcile); a pause must not
      // queue behind it, or the figure is the benchmark's rhythm, not the agent's overhead.
      std::this_thread::sleep_for(cfg.settle);
    };
    ActorDriver::Transition lr_pause, lr_resume;
    auto run_leave_running = [&] {
      auto p = leave_running.Drive("Paused", "STATUS_PAUSED");
      if (!p.ok()) Die("leave-running pause, cycle " + std::to_string(i) + ": " + p.status().ToString());
      lr_pause = *p;
      auto r = leave_running.Drive("Running", "STATUS_RUNNING");
      if (!r.ok()) Die("leave-running resume, cycle " + std::to_string(i) + ": " + r.status().ToString());
      lr_resume = *r;
      std::this_thread::sleep_for(cfg.settle);
    };
    auto run_direct = [&] {
      auto b = direct.Run();
      if (!b.ok()) Die("direct cycle " + std::to_string(i) + ": " + b.status().ToString());
      base = *b;
      std::this_thread::sleep_for(cfg.settle);  // the same rest as the agent's sandbox gets
    };
    // The sides in a rotating order: none always runs right after another's checkpoint.
    std::vector<std::function<void()>> sides = {run_agent, run_direct};
    if (cfg.leave_running_side) sides.push_back(run_leave_running);
    for (size_t k = 0; k < sides.size(); ++k) sides[(k + static_cast<size_t>(i)) % sides.size()]();
    if (!measured) continue;
    const double overhead = pause.e2e_ms - pause.checkpoint_ms;
    s.pause_e2e.push_back(pause.e2e_ms);
    s.agent_checkpoint.push_back(pause.checkpoint_ms);
    s.overhead.push_back(overhead);
    s.direct_checkpoint.push_back(base.checkpoint_ms);
    s.resume_e2e.push_back(resume.e2e_ms);
    s.direct_restore.push_back(base.restore_ms);
    s.direct_delete.push_back(base.delete_ms);
    s.direct_sha256.push_back(base.sha256_ms);
    s.direct_fsync.push_back(base.fsync_ms);
    s.direct_remove.push_back(base.remove_ms);
    s.agent_image.push_back(pause.image_bytes);
    s.direct_image.push_back(base.image_bytes);
    if (cfg.leave_running_side) {
      s.lr_pause_e2e.push_back(lr_pause.e2e_ms);
      s.lr_checkpoint.push_back(lr_pause.checkpoint_ms);
      s.lr_resume_e2e.push_back(lr_resume.e2e_ms);
    }
    if (csv.is_open()) {
      const char* first[] = {"agent-first", "direct-first", "lr-first"};
      csv << (i - cfg.warmup) << "," << first[static_cast<size_t>(i) % sides.size()] << ","
          << pause.e2e_ms << "," << pause.checkpoint_ms << "," << overhead << ","
          << base.checkpoint_ms << "," << base.delete_ms << "," << resume.e2e_ms << ","
          << base.restore_ms << "," << lr_pause.e2e_ms << "," << lr_pause.checkpoint_ms << ","
          << pause.image_bytes << "," << lr_pause.image_bytes << "\n";
      csv.flush();  // a run cut short keeps every cycle it finished
    }
    std::fprintf(stderr,
                 "cycle %3d: pause %7.1f ms (checkpoint %7.1f, overhead %6.1f) | direct "
                 "checkpoint %7.1f ms | resume %7.1f ms, direct restore %7.1f ms\n",
                 i - cfg.warmup, pause.e2e_ms, pause.checkpoint_ms, overhead, base.checkpoint_ms,
                 resume.e2e_ms, base.restore_ms);
  }

  agent.Delete();
  if (cfg.leave_running_side) leave_running.Delete();
  direct.Stop();

  std::printf("\n  %-46s %9s %9s %9s %9s\n", ("milliseconds (N=" + std::to_string(cfg.cycles) + ")").c_str(),
              "p50", "p99", "mean", "min");
  PrintRow("agent: end-to-end pause (PATCH → PAUSED)", s.pause_e2e);
  PrintRow("agent: runsc checkpoint (durationSeconds)", s.agent_checkpoint);
  PrintRow("agent: overhead (end-to-end − checkpoint)", s.overhead);
  PrintRow("direct: runsc checkpoint", s.direct_checkpoint);
  PrintRow("direct: runsc delete -force (after it)", s.direct_delete);
  PrintRow("direct, diagnostic: sha256 of the image", s.direct_sha256);
  PrintRow("direct, diagnostic: fsync of the image files", s.direct_fsync);
  PrintRow("direct, diagnostic: remove the previous image", s.direct_remove);
  PrintRow("agent: end-to-end resume (PATCH → RUNNING)", s.resume_e2e);
  PrintRow("direct: runsc restore -detach", s.direct_restore);
  if (cfg.leave_running_side) {
    PrintRow("leave-running: end-to-end pause", s.lr_pause_e2e);
    PrintRow("leave-running: checkpoint -leave-running", s.lr_checkpoint);
    PrintRow("leave-running: end-to-end resume", s.lr_resume_e2e);
  }

  const double ratio50 = Percentile(s.pause_e2e, 50) / Percentile(s.direct_checkpoint, 50);
  const double ratio99 = Percentile(s.pause_e2e, 99) / Percentile(s.direct_checkpoint, 99);
  const double ck_ratio = Percentile(s.agent_checkpoint, 50) / Percentile(s.direct_checkpoint, 50);
  const double overhead99 = Percentile(s.overhead, 99);
  std::printf("\n  ratio end-to-end pause / direct checkpoint: p50 %.3f, p99 %.3f\n", ratio50,
              ratio99);
  std::printf("  ratio agent checkpoint / direct checkpoint (same work, should be ~1): p50 %.3f\n",
              ck_ratio);
  if (cfg.leave_running_side) {
    std::printf(
        "  LeaveRunningThenStop / Direct (same agent, same bundle): end-to-end pause p50 %.3f, "
        "p99 %.3f; checkpoint p50 %.3f\n",
        Percentile(s.lr_pause_e2e, 50) / Percentile(s.pause_e2e, 50),
        Percentile(s.lr_pause_e2e, 99) / Percentile(s.pause_e2e, 99),
        Percentile(s.lr_checkpoint, 50) / Percentile(s.agent_checkpoint, 50));
  }
  std::printf("  checkpoint image, p50: agent %.0f bytes, direct %.0f bytes\n",
              Percentile(s.agent_image, 50), Percentile(s.direct_image, 50));

  if (!s.steps.empty()) {
    std::printf("\n  where a pause goes (agent log, ms resolution; %zu of %d pauses split)\n",
                s.steps.begin()->second.size(), cfg.cycles);
    std::printf("  %-72s %7s %7s %7s\n", "step", "p50", "p99", "mean");
    for (const auto& [key, label] : kSteps) {
      const auto& v = s.steps[key];
      std::printf("  %-72s %7.1f %7.1f %7.1f\n", label.c_str(), Percentile(v, 50),
                  Percentile(v, 99), Mean(v));
    }
  } else if (log) {
    std::printf("\n  the agent log could not be split into steps (run the agent at --log-level debug)\n");
  }

  // No verdict from samples that are not all there (an empty one reads as 0 ms: "met").
  const size_t want = static_cast<size_t>(std::max(cfg.cycles, 0));
  if (want == 0 || s.pause_e2e.size() != want || s.direct_checkpoint.size() != want ||
      s.overhead.size() != want) {
    std::printf("\n  no verdict: %zu agent pauses and %zu direct checkpoints measured, not %zu\n",
                s.pause_e2e.size(), s.direct_checkpoint.size(), want);
    return 1;
  }
  const bool overhead_ok = overhead99 <= 100.0;
  const bool ratio_ok = ratio50 <= 1.1 && ratio99 <= 1.1;
  std::printf("\n  target overhead p99 <= 100 ms: %s (%.1f ms)\n", overhead_ok ? "MET" : "MISSED",
              overhead99);
  std::printf("  target ratio <= 1.1 (p50 and p99): %s (p50 %.3f, p99 %.3f)\n",
              ratio_ok ? "MET" : "MISSED", ratio50, ratio99);
  return 0;
}

}  // namespace
}  // namespace stasis

int main(int argc, char** argv) {
  // A watch torn down by the server must not kill the benchmark.
  signal(SIGPIPE, SIG_IGN);
  return stasis::Main(argc, argv);
}
