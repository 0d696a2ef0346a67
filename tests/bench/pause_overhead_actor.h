// The agent side of the pause-overhead benchmark: an Actor driven through the API server, each
// transition timed from just before its PATCH to the watch event that shows its status.
#pragma once

#include <string>

#include "base/status.h"
#include "controller/kube_client.h"
#include "tests/bench/pause_overhead_common.h"

namespace stasis::pause_bench {

class ActorDriver {
 public:
  // `policy`: the actor's spec.checkpointPolicy ("Direct" or "LeaveRunningThenStop").
  ActorDriver(const Config& cfg, KubeClient& client, std::string name, std::string policy)
      : cfg_(cfg), client_(client), name_(std::move(name)), policy_(std::move(policy)) {}

  const std::string& name() const { return name_; }

  // Creates the actor (Running) and waits until it runs; exits on failure.
  void Create();

  struct Transition {
    double e2e_ms = 0;
    double checkpoint_ms = 0;  // status.latestSnapshot.durationSeconds, for a pause or suspend
    double image_bytes = 0;    // status.latestSnapshot.sizeBytes, for a pause or suspend
    int64_t t0_wall_ms = 0, t1_wall_ms = 0;
  };

  // Patches desiredState and waits for the status it leads to; the latency from just before the
  // PATCH to the watch event that shows the status.
  Result<Transition> Drive(const std::string& desired, const std::string& want);

  // Deletes the actor and waits (up to 120 s) until the agent's finalizer let it go.
  void Delete();

 private:
  struct Seen {
    json object;
    SteadyClock::time_point at;
    WallClock::time_point wall;
  };

  Result<Seen> WaitFor(std::string rv, const std::string& want);

  const Config& cfg_;
  KubeClient& client_;
  std::string name_, policy_;
};

}  // namespace stasis::pause_bench
