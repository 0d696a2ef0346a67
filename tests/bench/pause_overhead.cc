// The node agent's pause, suspend and resume of a real sandbox, against the runtime itself.
//
// --mode pause (the default): for each of N cycles it patches a pinned Actor's desiredState to
// Paused (t0 just before the PATCH), watches the actor from the PATCH response's
// resourceVersion until status.status is STATUS_PAUSED (t1), and takes the agent's own measure
// of the `runsc checkpoint` from status.latestSnapshot.durationSeconds: overhead = (t1 − t0) −
// checkpoint. It then patches Running and waits for STATUS_RUNNING the same way: the resume,
// from the node-local image the pause made.
//
// --mode suspend: the same with Suspended → STATUS_SUSPENDED (the image committed to the
// agent's --snapshot-store, its digests and fsyncs on the measured path), and the resume from
// the store.
//
// The baseline runs in the same process and the same run, interleaved with the agent cycles
// (in a rotating order: the machine is shared and noisy, so noise must hit every side alike): a
// second sandbox of the same bundle, started directly with runsc in its own -root, and for
// each cycle `runsc checkpoint -image-path <fresh dir>` (timed: the pause's or suspend's
// baseline), `runsc delete -force`, `runsc restore -detach` of that same image (timed: the
// resume's baseline). The direct side also times, as diagnostics outside the baseline, what the
// agent does after a checkpoint on the same image (delete, sha256, fsync, removal of the
// previous image).
//
// A third side, in the same rotation: a second actor of the same bundle on the same agent with
// spec.checkpointPolicy LeaveRunningThenStop, driven like the first; its figures are reported
// as ratios to the Direct actor's (the extra cost of that policy).
//
// With --agent-log (the agent at --log-level debug), each pause and each resume is also split
// into its steps from the agent's log lines (pause_overhead_steps.h).
//
// With --gpu-uuid, both sides are live CUDA workloads on that GPU (hack/gpu-e2e.sh's benchmark
// mode, on the GPU machine): the actor asks for one GPU (the agent adds it and the
// cuda-checkpoint helper from the node's CDI specs), and the direct sandbox runs from a bundle
// written by the agent's own code for the same CDI devices (WriteGpuBundle), checkpointed
// with the same -cuda-checkpoint-path. The LeaveRunningThenStop side needs a second worker and
// is left out there (--leave-running-side=false): one GPU is one worker.
//
// hack/bench/pause-overhead.sh brings up the control plane and the agent and runs this.
// Exit status: 0 when the benchmark ran (targets met or not), 1 on any error.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "base/subprocess.h"
#include "cmd/stasis/flags.h"
#include "controller/rest_config.h"
#include "controller/transport.h"
#include "reconcilers/node/sandbox_id.h"
#include "tests/bench/pause_overhead_actor.h"
#include "tests/bench/pause_overhead_direct.h"
#include "tests/bench/pause_overhead_report.h"
#include "tests/bench/pause_overhead_steps.h"

namespace stasis::pause_bench {
namespace {

using namespace std::chrono_literals;

void DefineFlags(Flags& f) {
  f.Define("mode", "pause", "pause (Paused, then Running) or suspend (Suspended into the store, then Running)");
  f.Define("kubeconfig", "", "admin kubeconfig of the control plane (default $KUBECONFIG)");
  f.Define("runsc", "", "the runsc binary the agent uses (hack/runsc.sh prints it)");
  f.Define("runsc-flags", "-network=none", "global runsc flags, as the agent's --runsc-flags");
  f.Define("bundle", "", "the OCI bundle of both sandboxes (hack/make-bundle.sh)");
  f.Define("node", "", "the node agent's --node-name (the actor is pinned to it)");
  f.Define("namespace", "default", "the actor's namespace");
  f.Define("name", "bench-pause", "the actor's name");
  f.Define("work-dir", "", "scratch directory for the direct sandbox's root and images");
  f.Define("cycles", "50", "measured checkpoint/resume cycles of each side");
  f.Define("warmup", "2", "unmeasured cycles of each side first");
  f.Define("settle", "1s",
           "unmeasured wait after each resume and each direct restore, before the next checkpoint, and between an "
           "actor's checkpoint and its resume");
  f.Define("agent-log", "", "the agent's log (at --log-level debug): split each pause and resume into steps");
  f.Define("csv", "", "write every cycle's figures to this file");
  f.Define("gpu-uuid", "", "a GPU run: the UUID of the GPU both sides use (the agent's worker's)");
  f.Define("cdi-spec-dirs", "/etc/cdi,/var/run/cdi", "a GPU run: the node's CDI specs, as the agent's flag");
  f.Define("gpu-cdi-kind", "nvidia.com/gpu", "a GPU run: the CDI kind of the node's GPUs");
  f.Define("cuda-checkpoint-path", "/opt/stasis/cuda-checkpoint",
           "a GPU run: the helper's path inside the container (spec.gpu.cudaCheckpointPath)");
  f.Define("leave-running-side", "true", "also drive a LeaveRunningThenStop actor (needs a second worker)");
  f.Define("peer-object-store", "false",
           "--mode suspend into an object store: the direct side uploads its image with curl --aws-sigv4 and downloads "
           "it again before its restore (AWS_* variables and STASIS_S3_BUCKET, as hack/object-store.sh up prints)");
  f.Define("agent-store-cache", "",
           "the agent's object-store cache (<root>/store-cache): the actor's entry is removed before each resume, so "
           "that it downloads");
  f.Define("time-budget", "0s",
           "stop before a cycle that would end past this time since the start (the longest cycle so far as its "
           "guess) and report the cycles measured; 0s: run every cycle");
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; std::getline(in, w, sep);) {
    if (!w.empty()) out.push_back(w);
  }
  return out;
}

Config ParseFlags(int argc, char** argv) {
  Flags f;
  DefineFlags(f);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (Status s = f.Parse(args); !s.ok()) Die(s.ToString());
  if (f.help_requested()) {
    std::printf("Usage: bench_pause_overhead [flags]\n\n%s", f.Usage().c_str());
    std::exit(0);
  }
  Config c;
  const std::string mode = f.Get("mode");
  if (mode != "pause" && mode != "suspend") Die("--mode: pause or suspend, not " + mode);
  c.mode = mode == "pause" ? Mode::kPause : Mode::kSuspend;
  c.kubeconfig = f.Get("kubeconfig");
  if (c.kubeconfig.empty() && std::getenv("KUBECONFIG")) c.kubeconfig = std::getenv("KUBECONFIG");
  c.runsc = f.Get("runsc");
  c.runsc_flags = Split(f.Get("runsc-flags"), ' ');
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
  c.cdi_spec_dirs = Split(f.Get("cdi-spec-dirs"), ',');
  c.leave_running_side = f.GetBool("leave-running-side");
  c.peer_object_store = f.GetBool("peer-object-store");
  c.agent_store_cache = f.Get("agent-store-cache");
  if (c.peer_object_store && c.mode != Mode::kSuspend) Die("--peer-object-store needs --mode suspend");
  auto cycles = f.GetInt("cycles", 1, 100000);
  auto warmup = f.GetInt("warmup", 0, 1000);
  auto settle = f.GetSeconds("settle");
  auto budget = f.GetSeconds("time-budget");
  if (!budget.ok()) Die(budget.status().ToString());
  c.time_budget = std::chrono::seconds(static_cast<int64_t>(*budget));
  if (!cycles.ok()) Die(cycles.status().ToString());
  if (!warmup.ok()) Die(warmup.status().ToString());
  if (!settle.ok()) Die(settle.status().ToString());
  c.settle = std::chrono::milliseconds(static_cast<int64_t>(*settle * 1000));
  c.cycles = *cycles;
  c.warmup = *warmup;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"kubeconfig", c.kubeconfig}, {"runsc", c.runsc}, {"bundle", c.bundle}, {"node", c.node},
           {"work-dir", c.work_dir}}) {
    if (value.empty()) Die("--" + flag + " is required");
  }
  return c;
}

std::string RunscVersion(const std::string& runsc) {
  auto r = RunCommand({runsc, "--version"}, 30s);
  if (!r.ok() || !r->success()) return "unknown";
  return r->out.substr(0, r->out.find('\n'));
}

using Splitter = std::optional<StepSplit> (*)(const std::vector<LogLine>&, const std::string&, const std::string&,
                                              int64_t, int64_t);

// One measured cycle of each side, in a rotating order, and what it leaves in Samples.
class Bench {
 public:
  Bench(const Config& cfg, KubeClient& client)
      : cfg_(cfg), agent_(cfg, client, cfg.name, "Direct"),
        leave_running_(cfg, client, cfg.name + "-lr", "LeaveRunningThenStop"), direct_(cfg),
        sandbox_(SandboxIdFor(cfg.ns, cfg.name)), actor_(cfg.ns + "/" + cfg.name) {
    if (!cfg.agent_log.empty()) log_.emplace(cfg.agent_log);
  }

  void Start() {
    agent_.Create();
    if (cfg_.leave_running_side) leave_running_.Create();
    direct_.Start();
    if (cfg_.csv.empty()) return;
    csv_.open(cfg_.csv);
    csv_ << "cycle,order,pause_e2e_ms,agent_checkpoint_ms,overhead_ms,direct_checkpoint_ms,"
            "direct_delete_ms,resume_e2e_ms,direct_restore_ms,lr_pause_e2e_ms,lr_checkpoint_ms,"
            "agent_image_bytes,lr_image_bytes,mode,resume_overhead_ms\n";
  }

  void Stop() {
    agent_.Delete();
    if (cfg_.leave_running_side) leave_running_.Delete();
    direct_.Stop();
  }

  void Cycle(int i) {
    const bool measured = i >= cfg_.warmup;
    Pair agent, lr;
    DirectSandbox::Cycle base;
    // The sides in a rotating order: none always runs right after another's checkpoint.
    std::vector<std::function<void()>> sides = {[&] { agent = RunActor(agent_, i, measured); },
                                                [&] { base = RunDirect(i); }};
    if (cfg_.leave_running_side) sides.push_back([&] { lr = RunActor(leave_running_, i, false); });
    for (size_t k = 0; k < sides.size(); ++k) sides[(k + static_cast<size_t>(i)) % sides.size()]();
    if (measured) Record(i - cfg_.warmup, static_cast<size_t>(i) % sides.size(), agent, lr, base);
  }

  const Samples& samples() const { return s_; }
  bool have_log() const { return log_.has_value(); }

 private:
  struct Pair {
    ActorDriver::Transition rest, resume;
    double resume_restore_ms = NAN;  // the agent's runsc restore, from its log
  };

  Pair RunActor(ActorDriver& actor, int i, bool split);
  DirectSandbox::Cycle RunDirect(int i);
  std::optional<StepSplit> SplitFromLog(Splitter split, const ActorDriver::Transition& t);
  void Record(int cycle, size_t order, const Pair& agent, const Pair& lr, const DirectSandbox::Cycle& base);

  const Config& cfg_;
  ActorDriver agent_, leave_running_;
  DirectSandbox direct_;
  const std::string sandbox_, actor_;
  std::optional<LogTail> log_;
  std::ofstream csv_;
  Samples s_;
};

// The agent logs the last line of a step just after its status write, which the client may see
// first: the log is read again for a moment (unmeasured, before the next transition).
std::optional<StepSplit> Bench::SplitFromLog(Splitter split, const ActorDriver::Transition& t) {
  std::vector<LogLine> lines;
  for (int attempt = 0; attempt < 40; ++attempt) {
    auto more = log_->Read();
    lines.insert(lines.end(), more.begin(), more.end());
    if (auto s = split(lines, sandbox_, actor_, t.t0_wall_ms, t.t1_wall_ms)) return s;
    std::this_thread::sleep_for(25ms);
  }
  return std::nullopt;
}

Bench::Pair Bench::RunActor(ActorDriver& actor, int i, bool split) {
  Pair p;
  split = split && log_.has_value();
  if (split) log_->Skip();
  auto rest = actor.Drive(cfg_.RestDesired(), cfg_.RestStatus());
  if (!rest.ok()) Die(actor.name() + " " + cfg_.ModeName() + ", cycle " + std::to_string(i) + ": " + rest.status().ToString());
  p.rest = *rest;
  if (split && cfg_.mode == Mode::kPause) {
    if (auto steps = SplitFromLog(SplitPause, p.rest)) {
      for (const auto& [k, v] : *steps) s_.pause_steps[k].push_back(v);
    }
  }
  // After the status write that ends a pause, the agent still gives the worker back and deletes
  // the stopped sandbox, off the pause's path but in the actor's reconcile: a resume patched at
  // once would queue behind that, a figure of the benchmark's rhythm rather than of the resume.
  std::this_thread::sleep_for(cfg_.settle);
  if (!cfg_.agent_store_cache.empty()) {
    std::error_code ec;  // unmeasured, while the actor rests SUSPENDED: the agent is idle for it
    std::filesystem::remove_all(std::filesystem::path(cfg_.agent_store_cache) / cfg_.ns / actor.name(), ec);
  }
  if (split) log_->Skip();
  auto resume = actor.Drive("Running", "STATUS_RUNNING");
  if (!resume.ok()) Die(actor.name() + " resume, cycle " + std::to_string(i) + ": " + resume.status().ToString());
  p.resume = *resume;
  if (split) {
    if (auto steps = SplitFromLog(SplitResume, p.resume)) {
      for (const auto& [k, v] : *steps) s_.resume_steps[k].push_back(v);
      p.resume_restore_ms = steps->at("runsc_restore");
    }
  }
  // The agent reacts to its own RUNNING write (a liveness reconcile); a checkpoint must not
  // queue behind it, or the figure is the benchmark's rhythm, not the agent's overhead.
  std::this_thread::sleep_for(cfg_.settle);
  return p;
}

DirectSandbox::Cycle Bench::RunDirect(int i) {
  auto b = direct_.Run();
  if (!b.ok()) Die("direct cycle " + std::to_string(i) + ": " + b.status().ToString());
  std::this_thread::sleep_for(cfg_.settle);  // the same rest as the agent's sandbox gets
  return *b;
}

void Bench::Record(int cycle, size_t order, const Pair& agent, const Pair& lr, const DirectSandbox::Cycle& base) {
  const double overhead = agent.rest.e2e_ms - agent.rest.checkpoint_ms;
  const double resume_overhead = agent.resume.e2e_ms - agent.resume_restore_ms;
  s_.rest_e2e.push_back(agent.rest.e2e_ms);
  s_.agent_checkpoint.push_back(agent.rest.checkpoint_ms);
  s_.overhead.push_back(overhead);
  s_.direct_checkpoint.push_back(base.checkpoint_ms);
  s_.resume_e2e.push_back(agent.resume.e2e_ms);
  if (!std::isnan(resume_overhead)) s_.resume_overhead.push_back(resume_overhead);
  s_.direct_restore.push_back(base.restore_ms);
  s_.direct_delete.push_back(base.delete_ms);
  s_.direct_sha256.push_back(base.sha256_ms);
  s_.direct_fsync.push_back(base.fsync_ms);
  s_.direct_remove.push_back(base.remove_ms);
  if (cfg_.peer_object_store) {
    s_.peer_upload.push_back(base.upload_ms);
    s_.peer_download.push_back(base.download_ms);
    s_.peer_suspend.push_back(base.checkpoint_ms + base.upload_ms);
    s_.peer_resume.push_back(base.download_ms + base.restore_ms);
  }
  s_.agent_image.push_back(agent.rest.image_bytes);
  s_.direct_image.push_back(base.image_bytes);
  if (cfg_.leave_running_side) {
    s_.lr_rest_e2e.push_back(lr.rest.e2e_ms);
    s_.lr_checkpoint.push_back(lr.rest.checkpoint_ms);
    s_.lr_resume_e2e.push_back(lr.resume.e2e_ms);
  }
  if (csv_.is_open()) {
    const char* first[] = {"agent-first", "direct-first", "lr-first"};
    csv_ << cycle << "," << first[order] << "," << agent.rest.e2e_ms << "," << agent.rest.checkpoint_ms << ","
         << overhead << "," << base.checkpoint_ms << "," << base.delete_ms << "," << agent.resume.e2e_ms << ","
         << base.restore_ms << "," << lr.rest.e2e_ms << "," << lr.rest.checkpoint_ms << "," << agent.rest.image_bytes
         << "," << lr.rest.image_bytes << "," << cfg_.ModeName() << "," << resume_overhead << "\n";
    csv_.flush();  // a run cut short keeps every cycle it finished
  }
  std::fprintf(stderr,
               "cycle %3d: %s %7.1f ms (checkpoint %7.1f, overhead %6.1f) | direct checkpoint %7.1f ms | resume "
               "%7.1f ms (overhead %6.1f), direct restore %7.1f ms\n",
               cycle, cfg_.ModeName(), agent.rest.e2e_ms, agent.rest.checkpoint_ms, overhead, base.checkpoint_ms,
               agent.resume.e2e_ms, resume_overhead, base.restore_ms);
}

// Returns the number of measured cycles run.
int RunCycles(const Config& cfg, Bench& bench) {
  const auto start = SteadyClock::now();
  SteadyClock::duration longest{0};
  for (int i = 0; i < cfg.warmup + cfg.cycles; ++i) {
    const auto cycle_start = SteadyClock::now();
    if (cfg.time_budget.count() > 0 && cycle_start - start + longest > cfg.time_budget) {
      std::printf("  time budget of %llds reached: %d of %d measured cycles run\n",
                  static_cast<long long>(cfg.time_budget.count()), std::max(0, i - cfg.warmup), cfg.cycles);
      return std::max(0, i - cfg.warmup);
    }
    bench.Cycle(i);
    longest = std::max(longest, SteadyClock::now() - cycle_start);
  }
  return cfg.cycles;
}

int Main(int argc, char** argv) {
  const Config cfg = ParseFlags(argc, argv);
  auto rest = LoadKubeconfig(cfg.kubeconfig);
  if (!rest.ok()) Die(rest.status().ToString());
  KubeClient client(NewCpprestTransport(*rest));
  std::printf("%s overhead: %d cycles per side, %d sides rotated, %d warm-up cycles, %lld ms settle\n",
              cfg.ModeName(), cfg.cycles, cfg.leave_running_side ? 3 : 2, cfg.warmup,
              static_cast<long long>(cfg.settle.count()));
  std::printf("  %s; bundle %s; node %s; host cores %u\n", RunscVersion(cfg.runsc).c_str(), cfg.bundle.c_str(),
              cfg.node.c_str(), std::thread::hardware_concurrency());
  if (!cfg.gpu_uuid.empty()) {
    std::printf("  GPU run: both sides on %s, checkpointed with -cuda-checkpoint-path %s\n", cfg.gpu_uuid.c_str(),
                cfg.cuda_checkpoint_path.c_str());
  }
  std::fflush(stdout);
  Bench bench(cfg, client);
  bench.Start();
  const int measured = RunCycles(cfg, bench);
  bench.Stop();
  return PrintReport(cfg, bench.samples(), bench.have_log(), measured);
}

}  // namespace
}  // namespace stasis::pause_bench

int main(int argc, char** argv) {
  // A watch torn down by the server must not kill the benchmark.
  signal(SIGPIPE, SIG_IGN);
  return stasis::pause_bench::Main(argc, argv);
}
