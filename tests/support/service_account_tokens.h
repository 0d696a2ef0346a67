// Credentials of stasis's ServiceAccounts on the test control plane, as a cluster gives them:
// the node agent's token bound to a Pod on its node (so that the API server puts the node in
// userInfo.extra["authentication.kubernetes.io/node-name"], which the node-scope admission
// policy reads), the controller's a plain TokenRequest. The manifests (ServiceAccounts in
// stasis-system) must be applied first.
#pragma once

#include <filesystem>
#include <string>

namespace stasis::testing {

// The namespace the manifests install into (manifests/base/kustomization.yaml).
inline constexpr char kStasisSystemNs[] = "stasis-system";

// A Node object `node` and a Pod of ServiceAccount stasis-node on it (no kubelet: nothing
// runs), created once; then a token of stasis-node bound to that Pod. "" with the test failed
// when a step failed.
std::string NodeAgentToken(const std::string& node);
// A token of stasis-<role> bound to nothing: it carries no node.
std::string UnboundToken(const std::string& role);
// A kubeconfig at dir/kubeconfig-<label> that authenticates with `token`.
std::string TokenKubeconfig(const std::string& token, const std::string& label,
                            const std::filesystem::path& dir);

}  // namespace stasis::testing
