// API Priority and Fairness for stasis (manifests/base/flowcontrol.yaml), on a real
// kube-apiserver with APF on: the base applies as shipped, the API server accepts every
// FlowSchema with its priority level (none dangling), and it classifies requests as the roles
// make them — heartbeats and leader election into stasis-leases, everything else of each role
// into its own level, and nobody else's requests into stasis's. The API server says which
// FlowSchema and priority level served a request in the response headers
// X-Kubernetes-PF-FlowSchema-UID and X-Kubernetes-PF-PriorityLevel-UID; the requests are made
// as each ServiceAccount by impersonation, which the API server resolves before classifying.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kNodeAgent = "system:serviceaccount:stasis-system:stasis-node";
const std::string kController = "system:serviceaccount:stasis-system:stasis-controller";
const std::string kSomeoneElse = "system:serviceaccount:team-a:default";

class FlowControlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // hack/control-plane.sh runs the API server with APF off; a later flag wins.
    setenv("STASIS_APISERVER_EXTRA_FLAGS", "--enable-priority-and-fairness=true", 1);
    auto& cp = ControlPlane::Get();
    auto applied = cp.Kubectl({"apply", "-k", kSource + "/manifests/base"});
    ASSERT_TRUE(applied.success()) << applied.out << applied.err;
    ASSERT_TRUE(cp.Kubectl({"create", "namespace", "team-a"}).success());
  }

  // name → uid of every object of `resource` (flowschemas, prioritylevelconfigurations).
  static std::map<std::string, std::string> Uids(const std::string& resource) {
    auto r = ControlPlane::Get().Kubectl({"get", resource, "-o", "json"});
    std::map<std::string, std::string> names;
    if (!r.success()) return names;
    for (const auto& o : json::parse(r.out, nullptr, false).value("items", json::array())) {
      names[o["metadata"].value("uid", "")] = o["metadata"].value("name", "");
    }
    return names;
  }

  struct Classified {
    std::string flow_schema, priority_level, error;
  };

  // GET `path` as `user` (impersonated by the admin); which FlowSchema and level served it.
  static Classified As(const std::string& user, const std::string& path) {
    const auto& cp = ControlPlane::Get();
    const std::string pki = cp.dir() + "/pki/";
    auto r = RunCommand({"curl", "-sS", "-m", "10", "-o", "/dev/null", "-D", "-", "--cacert", pki + "ca.crt",
                         "--cert", pki + "admin.crt", "--key", pki + "admin.key", "-H", "Impersonate-User: " + user,
                         cp.server() + path},
                        20s);
    Classified c;
    if (!r.ok() || !r->success()) {
      c.error = r.ok() ? r->err : r.status().ToString();
      return c;
    }
    auto header = [&](const std::string& name) {
      const auto p = Lowercase(r->out).find(Lowercase(name) + ": ");
      if (p == std::string::npos) return std::string();
      const auto start = p + name.size() + 2;
      return r->out.substr(start, r->out.find_first_of("\r\n", start) - start);
    };
    c.flow_schema = Uids("flowschemas")[header("X-Kubernetes-PF-FlowSchema-UID")];
    c.priority_level = Uids("prioritylevelconfigurations")[header("X-Kubernetes-PF-PriorityLevel-UID")];
    if (c.flow_schema.empty()) c.error = "no FlowSchema named in the response:\n" + r->out;
    return c;
  }

  static std::string Lowercase(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  }
};

TEST_F(FlowControlTest, EverySchemaHasItsPriorityLevel) {
  // The API server's configuration controller writes each FlowSchema's Dangling condition.
  for (const std::string name : {"stasis-leases", "stasis-node-agents", "stasis-controller"}) {
    std::string dangling;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = ControlPlane::Get().Kubectl({"get", "flowschema", name, "-o",
                                            "jsonpath={.status.conditions[?(@.type==\"Dangling\")].status}"});
      if (r.success() && !(dangling = r.out).empty()) break;
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(dangling, "False") << name;
  }
}

TEST_F(FlowControlTest, EachRolesRequestsGoToItsOwnLevel) {
  struct Case {
    std::string user, path, flow_schema;
  };
  const std::vector<Case> cases = {
      {kNodeAgent, "/apis/coordination.k8s.io/v1/namespaces/stasis-system/leases/stasis-node-node-1",
       "stasis-leases"},
      {kController, "/apis/coordination.k8s.io/v1/namespaces/stasis-system/leases/stasis-controller",
       "stasis-leases"},
      {kNodeAgent, "/apis/stasis.dev/v1alpha1/namespaces/team-a/actors", "stasis-node-agents"},
      {kNodeAgent, "/apis/stasis.dev/v1alpha1/workers", "stasis-node-agents"},
      {kNodeAgent, "/api/v1/namespaces/team-a/events", "stasis-node-agents"},
      // A Lease elsewhere is not a heartbeat.
      {kNodeAgent, "/apis/coordination.k8s.io/v1/namespaces/team-a/leases", "stasis-node-agents"},
      {kController, "/apis/stasis.dev/v1alpha1/actors", "stasis-controller"},
      {kController, "/apis/stasis.dev/v1alpha1/workers", "stasis-controller"},
      {kController, "/version", "stasis-controller"},
  };
  for (const auto& c : cases) {
    const auto got = As(c.user, c.path);
    EXPECT_EQ(got.flow_schema, c.flow_schema) << c.user << " GET " << c.path << " " << got.error;
    EXPECT_EQ(got.priority_level, c.flow_schema) << c.user << " GET " << c.path;
  }
}

TEST_F(FlowControlTest, OtherClientsStayOutOfStasissLevels) {
  for (const std::string path : {"/apis/stasis.dev/v1alpha1/namespaces/team-a/actors",
                                 "/apis/coordination.k8s.io/v1/namespaces/stasis-system/leases/stasis-controller"}) {
    const auto got = As(kSomeoneElse, path);
    ASSERT_TRUE(got.error.empty()) << got.error;
    EXPECT_EQ(got.flow_schema.rfind("stasis-", 0), std::string::npos) << path << " went to " << got.flow_schema;
    EXPECT_EQ(got.priority_level.rfind("stasis-", 0), std::string::npos) << path << " went to " << got.priority_level;
  }
}

}  // namespace
}  // namespace stasis::testing
