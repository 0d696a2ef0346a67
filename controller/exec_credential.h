// Kubeconfig exec credential plugins (users[].user.exec, API group
// client.authentication.k8s.io, versions v1 and v1beta1), the way client-go's
// plugin/pkg/client/auth/exec runs them: the command with its args and env added to ours, and
// KUBERNETES_EXEC_INFO holding an ExecCredential whose spec says interactive=false (a daemon has
// no terminal) and, with provideClusterInfo, the cluster. Its stdout is an ExecCredential whose
// status holds a token and/or a client certificate and key, and maybe an expiry.
// Invariants: the plugin runs through RunCommand (argv only, a deadline, its own process group,
// stderr kept); a credential is cached until its expirationTimestamp has passed (none: until a
// 401 invalidates it), and every failure names the command, its exit code and its stderr.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stasis {

struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  // A path with a '/' is resolved against the defining kubeconfig's directory (as clientcmd
  // does); a bare name is looked up on PATH.
  std::string command;
  std::vector<std::string> args;
  std::vector<std::string> env;  // "NAME=value", added to (and overriding) ours
  std::string install_hint;      // shown when the command is not found
  bool provide_cluster_info = false;
  std::string exec_info;  // the KUBERNETES_EXEC_INFO value (ExecInfoJson), set by the loader
  std::string where;      // "kubeconfig <file> user '<name>' exec", for errors
};

// users[].user.exec of a kubeconfig, checked as clientcmd validates it: apiVersion (v1 or
// v1beta1) and command required, every env entry named, interactiveMode one of Never,
// IfAvailable, Always (v1 requires it; v1beta1 defaults to IfAvailable). Always is refused:
// stasis runs as a daemon without a terminal. kInvalidArgument naming `where` and the field.
Result<ExecConfig> ParseExecConfig(const YAML::Node& exec, const std::filesystem::path& dir,
                                   const std::string& where);

// The KUBERNETES_EXEC_INFO value: {"apiVersion", "kind": "ExecCredential", "spec":
// {"interactive": false, "cluster": {...}}}, spec.cluster only when provideClusterInfo: the
// kubeconfig cluster's server, tls-server-name, proxy-url, disable-compression,
// certificate-authority-data (base64 of `ca_pem`) and the config of its
// client.authentication.k8s.io/exec extension.
std::string ExecInfoJson(const ExecConfig& exec, const YAML::Node& cluster, const std::string& ca_pem);

struct ExecCredential {
  std::string token;
  std::string client_cert_pem;  // both or neither
  std::string client_key_pem;
  std::optional<std::chrono::system_clock::time_point> expiry;  // none: never expires
};

// The ExecCredential a plugin printed, checked as client-go does: its apiVersion is the one
// configured, kind ExecCredential, a status with a token or a certificate and key pair (both or
// neither), expirationTimestamp RFC 3339. kUnauthenticated naming `where` when it is not.
Result<ExecCredential> ParseExecCredential(std::string_view out, const std::string& api_version,
                                           const std::string& where);

// Runs the plugin once (deadline `deadline`) and parses what it printed. kUnauthenticated with
// the command, its exit code and stderr when it fails; with the installHint when the command
// is not found.
Result<ExecCredential> RunExecPlugin(const ExecConfig& exec, std::chrono::milliseconds deadline);

// The cached credential of one plugin, shared by every request of a client. Get() runs the
// plugin on first use and whenever the cached credential has expired (now after its expiry,
// client-go's rule); Invalidate(token) after a 401 makes the next Get() run it again, unless
// the cache already holds another token (another request refreshed it first).
class ExecCredentialSource {
 public:
  using Runner = std::function<Result<ExecCredential>()>;
  using WallClock = std::function<std::chrono::system_clock::time_point()>;
  explicit ExecCredentialSource(Runner run, WallClock now = std::chrono::system_clock::now)
      : run_(std::move(run)), now_(std::move(now)) {}

  Result<ExecCredential> Get();
  void Invalidate(const std::string& token_used);

 private:
  std::mutex mu_;  // held while the plugin runs: concurrent requests wait for one run
  Runner run_;
  WallClock now_;
  std::optional<ExecCredential> cached_;
};

}  // namespace stasis
