#include "tests/support/service_account_tokens.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/control_plane.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Creates the object unless it exists.
bool Ensure(const json& object) {
  CommandResult r = ControlPlane::Get().Kubectl({"create", "-f", "-"}, object.dump());
  const bool ok = r.exit_code == 0 || r.err.find("AlreadyExists") != std::string::npos;
  EXPECT_TRUE(ok) << r.err << "\n" << object.dump();
  return ok;
}

}  // namespace

std::string NodeAgentToken(const std::string& node) {
  const json node_object = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}};
  const std::string pod = "stasis-node-" + node;
  const json pod_object = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", pod}, {"namespace", kStasisSystemNs}}},
      {"spec",
       {{"nodeName", node},
        {"serviceAccountName", "stasis-node"},
        {"automountServiceAccountToken", false},
        {"containers", json::array({{{"name", "stasis-node"}, {"image", "stasis"}}})}}}};
  if (!Ensure(node_object) || !Ensure(pod_object)) return "";
  CommandResult token = ControlPlane::Get().Kubectl(
      {"create", "token", "stasis-node", "-n", kStasisSystemNs, "--duration=1h",
       "--bound-object-kind=Pod", "--bound-object-name=" + pod});
  EXPECT_EQ(token.exit_code, 0) << token.err;
  return token.exit_code == 0 ? Trimmed(token.out) : "";
}

std::string UnboundToken(const std::string& role) {
  CommandResult token = ControlPlane::Get().Kubectl(
      {"create", "token", "stasis-" + role, "-n", kStasisSystemNs, "--duration=1h"});
  EXPECT_EQ(token.exit_code, 0) << token.err;
  return token.exit_code == 0 ? Trimmed(token.out) : "";
}

std::string TokenKubeconfig(const std::string& token, const std::string& label,
                            const std::filesystem::path& dir) {
  const ControlPlane& cp = ControlPlane::Get();
  const std::filesystem::path path = dir / ("kubeconfig-" + label);
  std::ofstream out(path);
  out << "apiVersion: v1\nkind: Config\n"
      << "clusters:\n- name: local\n  cluster:\n    server: " << cp.server()
      << "\n    certificate-authority: " << cp.dir() << "/pki/ca.crt\n"
      << "users:\n- name: sa\n  user:\n    token: " << token << "\n"
      << "contexts:\n- name: sa\n  context:\n    cluster: local\n    user: sa\n"
      << "current-context: sa\n";
  return path.string();
}

}  // namespace stasis::testing
