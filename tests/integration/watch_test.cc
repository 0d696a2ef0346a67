// KubeClient::Watch through the real transport against a real kube-apiserver. The transport
// reads the stream in chunks of whatever has arrived and splits lines itself, so: a burst must
// arrive whole and in order (large events span reads and are reassembled), a lone event on an
// idle stream must be handed over without waiting for more bytes, and cancelling an idle watch
// must end it at once.
#include <gtest/gtest.h>

#include <cctype>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/kube_client.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ControlPlane;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};

// A watch on its own thread, recording each event (bookmarks aside) as it is handed over.
class Watcher {
 public:
  Watcher(KubeClient& client, const std::string& ns, const std::string& resource_version) {
    thread_ = std::thread([this, &client, ns, resource_version] {
      WatchOptions o;
      o.resource_version = resource_version;
      Status s = client.Watch(
          kConfigMaps, ns, o,
          [this](const json& event) {
            if (event.value("type", "") == "BOOKMARK") return true;
            std::lock_guard lock(mu_);
            events_.push_back(event);
            cv_.notify_all();
            return true;
          },
          &cancel_);
      std::lock_guard lock(mu_);
      status_ = s;
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~Watcher() { Stop(); }

  // True once `n` events have arrived; false after `timeout` or when the watch ended early.
  bool WaitForEvents(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n || ended_; }) &&
           events_.size() >= n;
  }
  // Cancels the watch and waits for Watch to return; how long that took.
  Clock::duration Stop() {
    const auto start = Clock::now();
    cancel_ = true;
    if (thread_.joinable()) thread_.join();
    return Clock::now() - start;
  }
  std::vector<json> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  Status status() {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> events_;
  Status status_;
  bool ended_ = false;
  std::thread thread_;
};

json ConfigMap(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"data", {{"v", "1"}}}};
}

// ~100 KiB, different for each object, so that a misplaced or lost byte changes it.
std::string Filler(int seed) {
  std::string s(100 * 1024, ' ');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return s;
}

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("watch");
    ASSERT_FALSE(ns_.empty());
    client_ = ControlPlane::Get().NewClient();
    auto list = client_->List(kConfigMaps, ns_);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    version_ = (*list)["metadata"]["resourceVersion"].get<std::string>();
  }

  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  std::string version_;  // the namespace before the test wrote anything
};

TEST_F(WatchTest, BurstArrivesWholeAndInOrder) {
  constexpr int kObjects = 300;
  auto name = [](int i) { return "cm-" + std::to_string(1000 + i); };
  for (int i = 0; i < kObjects; ++i) {
    json cm = ConfigMap(name(i));
    if (i % 10 == 0) cm["metadata"]["annotations"] = {{"filler", Filler(i)}};
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, cm).ok()) << i;
  }
  // Opened after the writes: the server replays them back to back, many events per read and
  // each large one spread over several.
  Watcher watcher(*client_, ns_, version_);
  ASSERT_TRUE(watcher.WaitForEvents(kObjects, 60s))
      << watcher.events().size() << " events, " << watcher.status().ToString();
  watcher.Stop();
  EXPECT_TRUE(watcher.status().ok()) << watcher.status().ToString();
  const auto events = watcher.events();
  ASSERT_EQ(events.size(), static_cast<size_t>(kObjects));
  for (int i = 0; i < kObjects; ++i) {
    const auto& meta = events[i]["object"]["metadata"];
    ASSERT_EQ(events[i]["type"], "ADDED") << i;
    ASSERT_EQ(meta["name"], name(i)) << "out of order at " << i;
    if (i % 10 == 0) {
      ASSERT_TRUE(meta.contains("annotations")) << i;
      ASSERT_TRUE(meta["annotations"]["filler"] == Filler(i)) << "filler of " << i << " differs";
    }
  }
}

TEST_F(WatchTest, LoneEventArrivesWithoutWaitingForMore) {
  Watcher watcher(*client_, ns_, version_);
  std::this_thread::sleep_for(1s);  // the stream is open and silent
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("lone")).ok());
  // The server's watch timeout (300 s) is minutes away: an event held back for more bytes
  // misses this bound, which leaves a slow (sanitized, loaded) build plenty of room.
  ASSERT_TRUE(watcher.WaitForEvents(1, 30s)) << watcher.status().ToString();
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(
      client_->Patch(kConfigMaps, ns_, "lone", PatchType::kMerge, {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(watcher.WaitForEvents(2, 30s)) << watcher.status().ToString();
  const auto events = watcher.events();
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["type"], "MODIFIED");
  EXPECT_EQ(events[1]["object"]["data"]["v"], "2");
}

TEST_F(WatchTest, CancellingAnIdleWatchEndsItAtOnce) {
  Watcher watcher(*client_, ns_, version_);
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("one")).ok());
  ASSERT_TRUE(watcher.WaitForEvents(1, 10s)) << watcher.status().ToString();
  std::this_thread::sleep_for(500ms);  // blocked in a read with nothing to come
  const auto took = watcher.Stop();
  // Cancellation is checked every 50 ms; a watch that missed it would block until the
  // server's 300 s timeout. The bound sits between the two, far from both.
  EXPECT_LT(took, 15s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms";
  EXPECT_TRUE(watcher.status().ok()) << watcher.status().ToString();  // a clean end
}

}  // namespace
}  // namespace stasis
