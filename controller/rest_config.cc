#include "controller/rest_config.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/base64.h"
#include "controller/exec_credential.h"
#include "controller/kubeconfig_merge.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;

// How long an exec credential plugin may run (cloud CLIs answer in a second or two).
constexpr std::chrono::seconds kExecPluginDeadline{30};

Status Invalid(const std::string& where, const std::string& what) {
  return Status(Code::kInvalidArgument, where + ": " + what);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kNotFound, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::string> DecodeBase64(const std::string& in, const std::string& where) {
  auto decoded = stasis::DecodeBase64(in);
  if (!decoded) return Invalid(where, "is not valid base64");
  return *decoded;
}

// The entry named `name` of a merged list such as `clusters`, with its body a map.
Result<KubeconfigEntry> Lookup(const std::map<std::string, KubeconfigEntry>& entries,
                               const std::string& list, const std::string& key,
                               const std::string& name, const std::string& where) {
  auto it = entries.find(name);
  if (it == entries.end()) return Invalid(where, "no " + key + " named '" + name + "' in '" + list + "'");
  if (!it->second.body || !it->second.body.IsMap()) {
    return Invalid(it->second.where, list + " entry '" + name + "' has no '" + key + "' map");
  }
  return it->second;
}

// A PEM from `<field>-data` (base64) or `<field>` (a file path).
Result<std::string> PemFrom(const YAML::Node& node, const std::string& field,
                            const fs::path& base, const std::string& where) {
  if (node[field + "-data"]) {
    auto decoded = DecodeBase64(node[field + "-data"].as<std::string>(), where + "." + field + "-data");
    if (!decoded.ok()) return decoded.status();
    if (decoded->find("-----BEGIN") == std::string::npos) {
      return Invalid(where + "." + field + "-data", "does not hold a PEM block");
    }
    return decoded;
  }
  if (node[field]) {
    fs::path p = node[field].as<std::string>();
    if (p.is_relative()) p = base / p;
    auto content = ReadWholeFile(p.string());
    if (!content.ok()) return Invalid(where + "." + field, content.status().message());
    if (content->find("-----BEGIN") == std::string::npos) {
      return Invalid(where + "." + field, p.string() + " does not hold a PEM block");
    }
    return content;
  }
  return std::string();
}

// Re-reads a token file when its modification time changes, and at most every 60 s.
std::function<Result<std::string>()> TokenFileReader(std::string path) {
  struct State {
    std::mutex mu;
    std::string token;
    fs::file_time_type mtime{};
    std::chrono::steady_clock::time_point checked{};
  };
  auto state = std::make_shared<State>();
  return [state, path]() -> Result<std::string> {
    std::lock_guard<std::mutex> lock(state->mu);
    auto now = std::chrono::steady_clock::now();
    std::error_code ec;
    auto mtime = fs::last_write_time(path, ec);
    if (!state->token.empty() && !ec && mtime == state->mtime &&
        now - state->checked < std::chrono::seconds(60)) {
      return state->token;
    }
    if (auto content = ReadWholeFile(path); content.ok()) {
      std::string t = *content;
      while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
      state->token = t;
      state->mtime = mtime;
      state->checked = now;
    }
    return state->token;
  };
}

Status CheckServer(const std::string& server, const std::string& where) {
  if (server.rfind("https://", 0) != 0) {
    return Invalid(where, "server '" + server + "' must be an https:// URL (TLS is always verified)");
  }
  return OkStatus();
}

// The cluster's server and CA, checked.
Status ApplyCluster(const KubeconfigEntry& cluster, const std::string& name, RestConfig& config) {
  const std::string where = cluster.where + " cluster '" + name + "'";
  if (!cluster.body["server"]) return Invalid(cluster.where, "cluster '" + name + "' has no server");
  config.server = cluster.body["server"].as<std::string>();
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  if (auto s = CheckServer(config.server, where); !s.ok()) return s;
  if (cluster.body["insecure-skip-tls-verify"] && cluster.body["insecure-skip-tls-verify"].as<bool>()) {
    return Invalid(cluster.where, "cluster '" + name + "' sets insecure-skip-tls-verify, which stasis refuses");
  }
  auto ca = PemFrom(cluster.body, "certificate-authority", cluster.dir, where);
  if (!ca.ok()) return ca.status();
  if (ca->empty()) {
    return Invalid(cluster.where, "cluster '" + name +
                                      "' has neither certificate-authority nor certificate-authority-data");
  }
  config.ca_pem = *ca;
  return OkStatus();
}

// users[].user.exec: the plugin runs once now (a broken one fails the load); its certificate is
// kept for the process's life, its token is cached and fetched again when it expires or after a
// 401 (a cpprest client's TLS context is fixed when made, so a rotated certificate would need
// new clients under live watches; a token needs nothing of the kind).
Status ApplyExec(const KubeconfigEntry& user, const std::string& where, const KubeconfigEntry& cluster,
                 RestConfig& config) {
  auto exec = ParseExecConfig(user.body["exec"], user.dir, where + " exec");
  if (!exec.ok()) return exec.status();
  exec->exec_info = ExecInfoJson(*exec, cluster.body, config.ca_pem);
  auto source = std::make_shared<ExecCredentialSource>(
      [exec = *exec] { return RunExecPlugin(exec, kExecPluginDeadline); });
  auto first = source->Get();
  if (!first.ok()) return first.status();
  config.client_cert_pem = first->client_cert_pem;
  config.client_key_pem = first->client_key_pem;
  if (first->token.empty()) return OkStatus();
  config.bearer_token = [source]() -> Result<std::string> {
    auto cred = source->Get();
    if (!cred.ok()) return cred.status();
    return cred->token;
  };
  config.on_unauthorized = [source](const std::string& token_used) { source->Invalidate(token_used); };
  return OkStatus();
}

// The user's credentials: client certificate and key, token, tokenFile or an exec plugin.
Status ApplyUser(const KubeconfigEntry& user, const std::string& name, const KubeconfigEntry& cluster,
                 RestConfig& config) {
  const std::string where = user.where + " user '" + name + "'";
  if (user.body["auth-provider"]) {
    return Invalid(where, "uses auth-provider credentials, which stasis does not support (use exec)");
  }
  auto cert = PemFrom(user.body, "client-certificate", user.dir, where);
  if (!cert.ok()) return cert.status();
  auto key = PemFrom(user.body, "client-key", user.dir, where);
  if (!key.ok()) return key.status();
  if (cert->empty() != key->empty()) {
    return Invalid(where, "has a client certificate without a key, or a key without a certificate");
  }
  config.client_cert_pem = *cert;
  config.client_key_pem = *key;
  const bool has_token = user.body["token"] || user.body["tokenFile"];
  if (user.body["exec"]) {
    if (has_token || !cert->empty()) {
      return Invalid(where, "sets exec together with token, tokenFile or a client certificate; "
                            "stasis uses one source of credentials");
    }
    return ApplyExec(user, where, cluster, config);
  }
  if (user.body["token"]) {
    std::string token = user.body["token"].as<std::string>();
    config.bearer_token = [token]() -> Result<std::string> { return token; };
  } else if (user.body["tokenFile"]) {
    fs::path p = user.body["tokenFile"].as<std::string>();
    if (p.is_relative()) p = user.dir / p;
    if (!fs::exists(p)) return Invalid(where, "tokenFile " + p.string() + " does not exist");
    config.bearer_token = TokenFileReader(p.string());
  }
  return OkStatus();
}

// The current context's cluster and user, each read relative to the file that defined it.
Result<RestConfig> FromMerged(const MergedKubeconfig& merged) {
  const std::string where = merged.Where();
  try {
    if (merged.current_context.empty()) return Invalid(where, "has no current-context");
    const std::string ctx_name = merged.current_context;
    auto ctx = Lookup(merged.contexts, "contexts", "context", ctx_name, where);
    if (!ctx.ok()) return ctx.status();
    if (!ctx->body["cluster"]) return Invalid(ctx->where, "context '" + ctx_name + "' names no cluster");
    const std::string cluster_name = ctx->body["cluster"].as<std::string>();
    auto cluster = Lookup(merged.clusters, "clusters", "cluster", cluster_name, where);
    if (!cluster.ok()) return cluster.status();
    RestConfig config;
    if (Status s = ApplyCluster(*cluster, cluster_name, config); !s.ok()) return s;
    if (ctx->body["user"]) {
      const std::string user_name = ctx->body["user"].as<std::string>();
      auto user = Lookup(merged.users, "users", "user", user_name, where);
      if (!user.ok()) return user.status();
      if (Status s = ApplyUser(*user, user_name, *cluster, config); !s.ok()) return s;
    }
    return config;
  } catch (const YAML::Exception& e) {
    return Invalid(where, std::string("has a field of the wrong type: ") + e.what());
  }
}

}  // namespace

Result<RestConfig> LoadKubeconfig(const std::string& path) {
  auto merged = ReadKubeconfigFile(path);
  if (!merged.ok()) return merged.status();
  return FromMerged(*merged);
}

Result<RestConfig> LoadKubeconfigList(const std::vector<std::string>& paths) {
  auto merged = MergeKubeconfigFiles(paths);
  if (!merged.ok()) return merged.status();
  return FromMerged(*merged);
}

Result<RestConfig> LoadInClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port || !*host || !*port) {
    return Status(Code::kNotFound,
                  "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  }
  RestConfig config;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  config.server = "https://" + h + ":" + port;
  auto ca = ReadWholeFile(sa_dir + "/ca.crt");
  if (!ca.ok()) return Status(Code::kInvalidArgument, "in-cluster config: cannot read " + sa_dir + "/ca.crt");
  config.ca_pem = *ca;
  if (!fs::exists(sa_dir + "/token")) {
    return Status(Code::kInvalidArgument, "in-cluster config: " + sa_dir + "/token does not exist");
  }
  config.bearer_token = TokenFileReader(sa_dir + "/token");
  return config;
}

Result<RestConfig> LoadRestConfig(const std::string& kubeconfig_flag) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag);
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    return LoadKubeconfigList(SplitKubeconfigList(env));
  }
  auto in_cluster = LoadInClusterConfig();
  if (in_cluster.ok() || in_cluster.status().code() != Code::kNotFound) return in_cluster;
  if (const char* home = std::getenv("HOME")) {
    std::string def = std::string(home) + "/.kube/config";
    if (fs::exists(def)) return LoadKubeconfig(def);
  }
  return Status(Code::kInvalidArgument,
                "no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

}  // namespace stasis
