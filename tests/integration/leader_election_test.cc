// Leader election against a real kube-apiserver, with client-go's default timings
// (15 s lease, 10 s renew deadline, 2 s retry): two candidates, exactly one leads; a released
// lease is taken over at the standby's next retry; a crashed leader's lease after it expires.
// Takeover times are printed. Also as two processes, the leader killed with SIGKILL.
#include "controller/leader_election.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "controller/metrics.h"
#include "controller/rest_config.h"
#include "tests/support/control_plane.h"

extern char** environ;

namespace stasis {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", true};

std::unique_ptr<KubeClient> NewClient() { return testing::ControlPlane::Get().NewClient(); }

template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = 20ms) {
  auto deadline = SteadyClock::now() + timeout;
  while (!pred()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

json LeaseSpec(KubeClient& client, const std::string& name) {
  auto lease = client.Get(kLeases, "default", name);
  if (!lease.ok()) return json::object();
  return lease->value("spec", json::object());
}

std::string Holder(KubeClient& client, const std::string& name) {
  auto spec = LeaseSpec(client, name);
  auto it = spec.find("holderIdentity");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : "";
}

// Waits until the lease has been renewed since it was acquired (renewTime moved past
// acquireTime): a leader that has renewed at least once, seen by the API server.
bool Renewed(KubeClient& client, const std::string& name) {
  return Eventually([&] {
    auto spec = LeaseSpec(client, name);
    return spec.contains("renewTime") && spec.value("renewTime", json()) != spec.value("acquireTime", json());
  }, 30s, 50ms);
}

// A release is taken over at the standby's next retry (2–4.4 s); an expiry no earlier than
// the 15 s lease less the 2.5 s before its last observed renewal. Takeovers are asserted on
// that line, which a slow (sanitized, loaded) build does not cross by accident.
constexpr double kBeforeExpiry = 15.0 - 2.5;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = NewClient();
    lease_ = std::string("le-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : lease_) c = static_cast<char>(std::tolower(c));
  }

  std::unique_ptr<LeaderElector> NewElector(const std::string& identity, bool release = true) {
    LeaderElectionConfig c;
    c.lease_namespace = "default";
    c.lease_name = lease_;
    c.identity = identity;
    c.release_on_cancel = release;
    c.metrics = &metrics_;
    c.on_stopped_leading = [this] { ++lost_; };
    auto e = LeaderElector::New(*client_, c);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(*e);
  }

  // Starts a and b together; returns {leader, standby} once one leads.
  std::pair<LeaderElector*, LeaderElector*> ElectOne(LeaderElector& a, LeaderElector& b) {
    a.Start();
    b.Start();
    EXPECT_TRUE(Eventually([&] { return a.IsLeader() || b.IsLeader(); }, 30s));
    return a.IsLeader() ? std::make_pair(&a, &b) : std::make_pair(&b, &a);
  }

  Metrics metrics_;
  std::unique_ptr<KubeClient> client_;
  std::string lease_;
  std::atomic<int> lost_{0};
};

TEST_F(LeaderElectionTest, ExactlyOneOfTwoCandidatesLeads) {
  auto a = NewElector("candidate-a");
  auto b = NewElector("candidate-b");
  auto [leader, standby] = ElectOne(*a, *b);
  ASSERT_TRUE(leader->IsLeader());
  // Over several renewals, never both and never neither.
  auto until = SteadyClock::now() + 6s;
  while (SteadyClock::now() < until) {
    ASSERT_NE(a->IsLeader(), b->IsLeader()) << "both or neither lead";
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(Holder(*client_, lease_), leader->identity());
  EXPECT_EQ(standby->ObservedLeader(), leader->identity());
  auto spec = LeaseSpec(*client_, lease_);
  EXPECT_EQ(spec.value("leaseDurationSeconds", 0), 15);
  EXPECT_EQ(spec.value("leaseTransitions", -1), 0);  // created, never taken over
  EXPECT_EQ(lost_.load(), 0);
  // leader_election_master_status{name=lease} reflects this process's last setter: both
  // electors share metrics_ here, so only check that the family exists.
  bool found = false;
  for (const auto& family : metrics_.registry()->Collect()) {
    if (family.name == "leader_election_master_status") found = true;
  }
  EXPECT_TRUE(found);
  a->Stop();
  b->Stop();
}

TEST_F(LeaderElectionTest, ReleasedLeaseIsTakenOverAtTheNextRetry) {
  auto a = NewElector("candidate-a");
  auto b = NewElector("candidate-b");
  auto [leader, standby] = ElectOne(*a, *b);
  std::string old_leader = leader->identity();
  auto stopped = SteadyClock::now();
  leader->Stop();  // releases: holderIdentity "", leaseDurationSeconds 1
  EXPECT_FALSE(leader->IsLeader());
  ASSERT_TRUE(Eventually([&] { return standby->IsLeader(); }, 30s, 5ms));
  double takeover = Seconds(SteadyClock::now() - stopped);
  std::printf("[ takeover ] after release: %.3f s (retry period 2 s, jitter up to 2.2x)\n",
              takeover);
  // The standby retries every 2–4.4 s; a release must not wait for the 15 s lease to expire.
  EXPECT_LT(takeover, kBeforeExpiry);
  EXPECT_EQ(Holder(*client_, lease_), standby->identity());
  auto spec = LeaseSpec(*client_, lease_);
  EXPECT_EQ(spec.value("leaseTransitions", -1), 1);
  EXPECT_EQ(spec.value("leaseDurationSeconds", 0), 15);
  EXPECT_EQ(lost_.load(), 0);  // a planned stop is not "lost"
  standby->Stop();
  // And the final release leaves the lease free.
  EXPECT_EQ(Holder(*client_, lease_), "");
  EXPECT_EQ(LeaseSpec(*client_, lease_).value("leaseDurationSeconds", 0), 1);
}

TEST_F(LeaderElectionTest, CrashedLeaderIsReplacedAfterTheLeaseExpires) {
  // Neither releases: a leader that stops renewing is a crashed one.
  auto a = NewElector("candidate-a", /*release=*/false);
  auto b = NewElector("candidate-b", /*release=*/false);
  auto [leader, standby] = ElectOne(*a, *b);
  ASSERT_TRUE(Renewed(*client_, lease_)) << "the leader never renewed";
  auto stopped = SteadyClock::now();
  leader->Stop();
  std::string holder_after_stop = Holder(*client_, lease_);
  EXPECT_EQ(holder_after_stop, leader->identity()) << "the crashed leader must not release";
  ASSERT_TRUE(Eventually([&] { return standby->IsLeader(); }, 60s, 5ms));
  double takeover = Seconds(SteadyClock::now() - stopped);
  std::printf("[ takeover ] after crash (no release): %.3f s (lease 15 s)\n", takeover);
  // Expiry runs from when the standby *observed* the last renewal: that renewal came ≤ 2 s
  // before the crash, the standby saw it up to one jittered retry (≤ 4.4 s) later, and takes
  // over at its first retry after expiry (≤ 4.4 s more): 24.8 s at most on an idle machine.
  // The upper bound is a second whole lease (what counting expiry twice would take), so a
  // slow build cannot fail it by accident.
  EXPECT_GT(takeover, kBeforeExpiry);
  EXPECT_LT(takeover, 2 * 15.0);
  EXPECT_EQ(LeaseSpec(*client_, lease_).value("leaseTransitions", -1), 1);
  standby->Stop();
}

TEST_F(LeaderElectionTest, ConfigIsValidatedAsClientGoDoes) {
  LeaderElectionConfig c;
  c.lease_namespace = "default";
  c.lease_name = "x";
  c.renew_deadline = 15s;  // not < lease duration
  EXPECT_EQ(LeaderElector::New(*client_, c).status().code(), Code::kInvalidArgument);
  c.renew_deadline = 2s;  // not > 1.2 × retry period
  EXPECT_EQ(LeaderElector::New(*client_, c).status().code(), Code::kInvalidArgument);
  c.renew_deadline = 10s;
  c.lease_name = "";
  EXPECT_EQ(LeaderElector::New(*client_, c).status().code(), Code::kInvalidArgument);
  c.lease_name = "x";
  auto ok = LeaderElector::New(*client_, c);
  ASSERT_TRUE(ok.ok());
  EXPECT_NE((*ok)->identity().find('_'), std::string::npos);  // hostname_uuid
}

// --- two processes -----------------------------------------------------------------------

struct Process {
  pid_t pid = -1;
  std::string identity;
  std::string log;
};

Process Spawn(const std::string& lease, const std::string& identity) {
  static const std::string helper =
      std::string(STASIS_BINARY_DIR) + "/tests/leader_election_helper";
  Process p;
  p.identity = identity;
  p.log = testing::ControlPlane::Get().dir() + "/" + lease + "-" + identity + ".log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = {helper, testing::ControlPlane::Get().kubeconfig(), "default",
                                   lease, identity};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = posix_spawn(&p.pid, helper.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "spawn " << helper;
  return p;
}

// Waits for the process and returns its exit status (-signal when killed).
int Reap(Process& p) {
  int status = 0;
  waitpid(p.pid, &status, 0);
  p.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST_F(LeaderElectionTest, TwoProcessesKillNineTheLeader) {
  Process a = Spawn(lease_, "process-a"), b = Spawn(lease_, "process-b");
  std::string holder;
  ASSERT_TRUE(Eventually([&] { return !(holder = Holder(*client_, lease_)).empty(); }, 20s, 50ms));
  Process& leader = holder == a.identity ? a : b;
  Process& standby = holder == a.identity ? b : a;
  ASSERT_EQ(holder, leader.identity);
  ASSERT_TRUE(Renewed(*client_, lease_)) << "the leader never renewed";
  EXPECT_EQ(Holder(*client_, lease_), leader.identity);  // still exactly one, and stable

  auto killed = SteadyClock::now();
  kill(leader.pid, SIGKILL);
  EXPECT_EQ(Reap(leader), -SIGKILL);
  ASSERT_TRUE(Eventually([&] { return Holder(*client_, lease_) == standby.identity; }, 60s, 20ms));
  double takeover = Seconds(SteadyClock::now() - killed);
  std::printf("[ takeover ] two processes, leader SIGKILLed: %.3f s (lease 15 s)\n", takeover);
  EXPECT_GT(takeover, kBeforeExpiry);
  EXPECT_LT(takeover, 2 * 15.0);  // as in CrashedLeaderIsReplaced…

  // The survivor reports that it leads. Its lease write lands before its callback runs, so
  // the lease alone does not say the callback ran; a SIGTERM in between is a stop in the
  // same instant as the acquire, which hands the lease back without ever leading.
  EXPECT_TRUE(Eventually(
      [&] { return ReadAll(standby.log).find("started_leading") != std::string::npos; }, 5s,
      20ms))
      << ReadAll(standby.log);

  // The survivor shuts down cleanly on SIGTERM and releases the lease.
  kill(standby.pid, SIGTERM);
  EXPECT_EQ(Reap(standby), 0);
  EXPECT_EQ(Holder(*client_, lease_), "");
}

TEST_F(LeaderElectionTest, TwoProcessesSigtermTheLeader) {
  Process a = Spawn(lease_, "process-a"), b = Spawn(lease_, "process-b");
  std::string holder;
  ASSERT_TRUE(Eventually([&] { return !(holder = Holder(*client_, lease_)).empty(); }, 20s, 50ms));
  Process& leader = holder == a.identity ? a : b;
  Process& standby = holder == a.identity ? b : a;
  auto stopped = SteadyClock::now();
  kill(leader.pid, SIGTERM);
  EXPECT_EQ(Reap(leader), 0);
  ASSERT_TRUE(Eventually([&] { return Holder(*client_, lease_) == standby.identity; }, 30s, 20ms));
  double takeover = Seconds(SteadyClock::now() - stopped);
  std::printf("[ takeover ] two processes, leader SIGTERMed (released): %.3f s\n", takeover);
  EXPECT_LT(takeover, kBeforeExpiry);
  kill(standby.pid, SIGTERM);
  EXPECT_EQ(Reap(standby), 0);
}

}  // namespace
}  // namespace stasis
