#include "tests/bench/pause_overhead_actor.h"

#include <cstdio>
#include <optional>
#include <thread>

#include "api/names.h"
#include "reconcilers/api_resources.h"

namespace stasis::pause_bench {

using namespace std::chrono_literals;

void ActorDriver::Create() {
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

Result<ActorDriver::Transition> ActorDriver::Drive(const std::string& desired, const std::string& want) {
  Transition t;
  const auto wall0 = WallClock::now();
  const auto t0 = SteadyClock::now();
  auto patched = client_.Patch(kActorType, cfg_.ns, name_, PatchType::kMerge, {{"spec", {{"desiredState", desired}}}});
  if (!patched.ok()) return patched.status();
  auto done = WaitFor((*patched)["metadata"]["resourceVersion"].get<std::string>(), want);
  if (!done.ok()) return done.status();
  t.e2e_ms = Ms(done->at - t0);
  t.t0_wall_ms = WallMs(wall0);
  t.t1_wall_ms = WallMs(done->wall);
  if (want == "STATUS_PAUSED" || want == "STATUS_SUSPENDED") {
    const json& snap = done->object["status"]["latestSnapshot"];
    if (!snap.contains("durationSeconds")) {
      return Status(Code::kInternal, want + " without latestSnapshot.durationSeconds");
    }
    t.checkpoint_ms = snap["durationSeconds"].get<double>() * 1000.0;
    t.image_bytes = snap.value("sizeBytes", 0.0);
  }
  return t;
}

void ActorDriver::Delete() {
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
  std::fprintf(stderr, "pause_overhead: actor %s/%s still there after 120 s\n", cfg_.ns.c_str(), name_.c_str());
}

// Watches the actor from `rv` until status.status == want for the current generation. A status
// the transition cannot lead to (FAILED, or the other resting status) is an error.
Result<ActorDriver::Seen> ActorDriver::WaitFor(std::string rv, const std::string& want) {
  const auto deadline = SteadyClock::now() + 300s;
  std::optional<Seen> found;
  Status failure;
  auto check = [&](const json& obj) {
    const json& st = obj.value("status", json::object());
    const std::string status = st.value("status", "");
    const bool current = st.value("observedGeneration", int64_t{-1}) == obj["metadata"].value("generation", int64_t{0});
    if (!current) return false;
    if (status == want) {
      found = Seen{obj, SteadyClock::now(), WallClock::now()};
      return true;
    }
    const bool other_rest = (want == "STATUS_PAUSED" && status == "STATUS_SUSPENDED") ||
                            (want == "STATUS_SUSPENDED" && status == "STATUS_PAUSED");
    if (status == "STATUS_FAILED" || other_rest) {
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
    if (!s.ok() && s.code() != Code::kGone && s.code() != Code::kDeadlineExceeded && s.code() != Code::kUnavailable) {
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

}  // namespace stasis::pause_bench
