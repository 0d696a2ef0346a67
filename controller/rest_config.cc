#include "controller/rest_config.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

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
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    auto pos = kAlphabet.find(c);
    if (pos == std::string::npos) return Invalid(where, "is not valid base64");
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

// Finds the entry named `name` in a kubeconfig list such as `clusters`.
Result<YAML::Node> FindNamed(const YAML::Node& root, const std::string& list,
                             const std::string& key, const std::string& name,
                             const std::string& file) {
  const YAML::Node seq = root[list];
  if (seq && !seq.IsSequence()) return Invalid(file, "'" + list + "' must be a list");
  if (seq) {
    for (const auto& item : seq) {
      if (item["name"] && item["name"].as<std::string>() == name) {
        if (!item[key] || !item[key].IsMap()) {
          return Invalid(file, list + " entry '" + name + "' has no '" + key + "' map");
        }
        return item[key];
      }
    }
  }
  return Invalid(file, "no " + key + " named '" + name + "' in '" + list + "'");
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
std::function<std::string()> TokenFileReader(std::string path) {
  struct State {
    std::mutex mu;
    std::string token;
    fs::file_time_type mtime{};
    std::chrono::steady_clock::time_point checked{};
  };
  auto state = std::make_shared<State>();
  return [state, path] {
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

}  // namespace

Result<RestConfig> LoadKubeconfig(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return Status(Code::kInvalidArgument, "kubeconfig " + path + ": cannot be read");
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Invalid("kubeconfig " + path, std::string("is not valid YAML: ") + e.what());
  }
  const std::string file = "kubeconfig " + path;
  if (!root.IsMap()) return Invalid(file, "is not a YAML map");
  try {
    if (!root["current-context"] || root["current-context"].as<std::string>().empty()) {
      return Invalid(file, "has no current-context");
    }
    const std::string ctx_name = root["current-context"].as<std::string>();
    auto ctx = FindNamed(root, "contexts", "context", ctx_name, file);
    if (!ctx.ok()) return ctx.status();
    if (!(*ctx)["cluster"]) return Invalid(file, "context '" + ctx_name + "' names no cluster");
    const std::string cluster_name = (*ctx)["cluster"].as<std::string>();
    auto cluster = FindNamed(root, "clusters", "cluster", cluster_name, file);
    if (!cluster.ok()) return cluster.status();

    const fs::path base = fs::absolute(path).parent_path();
    RestConfig config;
    if (!(*cluster)["server"]) return Invalid(file, "cluster '" + cluster_name + "' has no server");
    config.server = (*cluster)["server"].as<std::string>();
    while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
    if (auto s = CheckServer(config.server, file + " cluster '" + cluster_name + "'"); !s.ok()) return s;
    if ((*cluster)["insecure-skip-tls-verify"] && (*cluster)["insecure-skip-tls-verify"].as<bool>()) {
      return Invalid(file, "cluster '" + cluster_name +
                               "' sets insecure-skip-tls-verify, which stasis refuses");
    }
    auto ca = PemFrom(*cluster, "certificate-authority", base, file + " cluster '" + cluster_name + "'");
    if (!ca.ok()) return ca.status();
    if (ca->empty()) {
      return Invalid(file, "cluster '" + cluster_name +
                               "' has neither certificate-authority nor certificate-authority-data");
    }
    config.ca_pem = *ca;

    if ((*ctx)["user"]) {
      const std::string user_name = (*ctx)["user"].as<std::string>();
      auto user = FindNamed(root, "users", "user", user_name, file);
      if (!user.ok()) return user.status();
      const std::string where = file + " user '" + user_name + "'";
      auto cert = PemFrom(*user, "client-certificate", base, where);
      if (!cert.ok()) return cert.status();
      auto key = PemFrom(*user, "client-key", base, where);
      if (!key.ok()) return key.status();
      if (cert->empty() != key->empty()) {
        return Invalid(where, "has a client certificate without a key, or a key without a certificate");
      }
      config.client_cert_pem = *cert;
      config.client_key_pem = *key;
      if ((*user)["token"]) {
        std::string token = (*user)["token"].as<std::string>();
        config.bearer_token = [token] { return token; };
      } else if ((*user)["tokenFile"]) {
        fs::path p = (*user)["tokenFile"].as<std::string>();
        if (p.is_relative()) p = base / p;
        if (!fs::exists(p)) return Invalid(where, "tokenFile " + p.string() + " does not exist");
        config.bearer_token = TokenFileReader(p.string());
      }
      if ((*user)["exec"] || (*user)["auth-provider"]) {
        return Invalid(where, "uses exec or auth-provider credentials, which stasis does not support");
      }
    }
    return config;
  } catch (const YAML::Exception& e) {
    return Invalid(file, std::string("has a field of the wrong type: ") + e.what());
  }
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
    std::string first = env;
    first = first.substr(0, first.find(':'));  // the first file of a merged list
    return LoadKubeconfig(first);
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
