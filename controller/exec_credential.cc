#include "controller/exec_credential.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "base/time.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kV1[] = "client.authentication.k8s.io/v1";
constexpr char kV1beta1[] = "client.authentication.k8s.io/v1beta1";
// The cluster extension whose value client-go hands the plugin as spec.cluster.config.
constexpr char kExecExtension[] = "client.authentication.k8s.io/exec";
// What of a failing plugin's stderr an error keeps (its end, where the reason usually is).
constexpr size_t kStderrKept = 2048;

Status Invalid(const std::string& where, const std::string& what) {
  return Status(Code::kInvalidArgument, where + "." + what);
}

// A YAML scalar field that must be a string when present; "" when absent.
Result<std::string> OptionalString(const YAML::Node& node, const std::string& field,
                                   const std::string& where) {
  const YAML::Node value = node[field];
  if (!value || value.IsNull()) return std::string();
  if (!value.IsScalar()) return Invalid(where, field + " must be a string");
  return value.as<std::string>();
}

Result<std::vector<std::string>> ParseArgs(const YAML::Node& exec, const std::string& where) {
  std::vector<std::string> args;
  const YAML::Node list = exec["args"];
  if (!list || list.IsNull()) return args;
  if (!list.IsSequence()) return Invalid(where, "args must be a list of strings");
  for (const auto& arg : list) {
    if (!arg.IsScalar()) return Invalid(where, "args must be a list of strings");
    args.push_back(arg.as<std::string>());
  }
  return args;
}

Result<std::vector<std::string>> ParseEnv(const YAML::Node& exec, const std::string& where) {
  std::vector<std::string> env;
  const YAML::Node list = exec["env"];
  if (!list || list.IsNull()) return env;
  if (!list.IsSequence()) return Invalid(where, "env must be a list of {name, value}");
  for (const auto& entry : list) {
    if (!entry.IsMap()) return Invalid(where, "env must be a list of {name, value}");
    auto name = OptionalString(entry, "name", where + ".env[]");
    if (!name.ok()) return name.status();
    if (name->empty() || name->find('=') != std::string::npos) {
      return Invalid(where, "env: an entry has no name, or a name with '='");
    }
    auto value = OptionalString(entry, "value", where + ".env['" + *name + "']");
    if (!value.ok()) return value.status();
    env.push_back(*name + "=" + *value);
  }
  return env;
}

// interactiveMode as clientcmd defaults and validates it; Always cannot be met by a daemon.
Status CheckInteractiveMode(const YAML::Node& exec, const std::string& api_version,
                            const std::string& where) {
  auto mode = OptionalString(exec, "interactiveMode", where);
  if (!mode.ok()) return mode.status();
  if (mode->empty() && api_version == kV1beta1) *mode = "IfAvailable";
  if (mode->empty()) return Invalid(where, "interactiveMode must be set (Never or IfAvailable) for " + api_version);
  if (*mode == "Always") {
    return Invalid(where, "interactiveMode is Always: the plugin needs a terminal, which stasis (a daemon) "
                          "never has; use a plugin mode or credentials that work without one");
  }
  if (*mode != "Never" && *mode != "IfAvailable") {
    return Invalid(where, "interactiveMode '" + *mode + "' is not Never, IfAvailable or Always");
  }
  return OkStatus();
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(n);
  return out;
}

// A YAML value as JSON: quoted scalars stay strings, plain ones that read as a bool or an
// integer become one; maps and lists recurse.
json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  const std::string text = node.as<std::string>();
  if (node.Tag() == "!") return text;
  if (text == "true" || text == "false") return text == "true";
  long long number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec == std::errc() && end == text.data() + text.size()) return number;
  return text;
}

json ClusterInfo(const YAML::Node& cluster, const std::string& ca_pem) {
  json out = json::object();
  for (const char* field : {"server", "tls-server-name", "proxy-url"}) {
    if (cluster[field] && cluster[field].IsScalar()) out[field] = cluster[field].as<std::string>();
  }
  if (cluster["disable-compression"] && cluster["disable-compression"].as<std::string>() == "true") {
    out["disable-compression"] = true;
  }
  if (!ca_pem.empty()) out["certificate-authority-data"] = Base64(ca_pem);
  if (cluster["extensions"] && cluster["extensions"].IsSequence()) {
    for (const auto& ext : cluster["extensions"]) {
      if (ext["name"] && ext["name"].as<std::string>() == kExecExtension && ext["extension"]) {
        out["config"] = YamlToJson(ext["extension"]);
      }
    }
  }
  return out;
}

Status Unauthenticated(const ExecConfig& exec, const std::string& what) {
  return Status(Code::kUnauthenticated, exec.where + ": plugin " + exec.command + " " + what);
}

std::string StderrTail(std::string err) {
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (err.size() > kStderrKept) err = "…" + err.substr(err.size() - kStderrKept);
  return err.empty() ? "(stderr empty)" : "stderr: " + err;
}

}  // namespace

Result<ExecConfig> ParseExecConfig(const YAML::Node& exec, const fs::path& dir, const std::string& where) {
  if (!exec.IsMap()) return Status(Code::kInvalidArgument, where + " must be a map");
  ExecConfig config;
  config.where = where;
  auto api_version = OptionalString(exec, "apiVersion", where);
  if (!api_version.ok()) return api_version.status();
  if (*api_version != kV1 && *api_version != kV1beta1) {
    return Invalid(where, "apiVersion '" + *api_version + "' is not " + kV1 + " or " + kV1beta1);
  }
  config.api_version = *api_version;
  auto command = OptionalString(exec, "command", where);
  if (!command.ok()) return command.status();
  if (command->empty()) return Invalid(where, "command must be set");
  config.command = *command;
  // clientcmd resolves a command holding a path separator against the kubeconfig's directory.
  if (config.command.find('/') != std::string::npos && fs::path(config.command).is_relative()) {
    config.command = (dir / config.command).lexically_normal().string();
  }
  auto args = ParseArgs(exec, where);
  if (!args.ok()) return args.status();
  config.args = std::move(*args);
  auto env = ParseEnv(exec, where);
  if (!env.ok()) return env.status();
  config.env = std::move(*env);
  auto hint = OptionalString(exec, "installHint", where);
  if (!hint.ok()) return hint.status();
  config.install_hint = *hint;
  if (const YAML::Node p = exec["provideClusterInfo"]; p && !p.IsNull()) {
    const std::string v = p.IsScalar() ? p.as<std::string>() : "";
    if (v != "true" && v != "false") return Invalid(where, "provideClusterInfo must be true or false");
    config.provide_cluster_info = v == "true";
  }
  if (Status s = CheckInteractiveMode(exec, config.api_version, where); !s.ok()) return s;
  return config;
}

std::string ExecInfoJson(const ExecConfig& exec, const YAML::Node& cluster, const std::string& ca_pem) {
  json info = {{"apiVersion", exec.api_version},
               {"kind", "ExecCredential"},
               {"spec", {{"interactive", false}}}};
  if (exec.provide_cluster_info) info["spec"]["cluster"] = ClusterInfo(cluster, ca_pem);
  return info.dump();
}

Result<ExecCredential> ParseExecCredential(std::string_view out, const std::string& api_version,
                                           const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Status(Code::kUnauthenticated, where + ": the plugin's ExecCredential " + what);
  };
  json doc = json::parse(out.begin(), out.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return bad("is not a JSON object");
  if (doc.value("apiVersion", json()) != api_version) {
    return bad("has apiVersion " + doc.value("apiVersion", json()).dump() + ", not the configured " +
               api_version);
  }
  if (doc.value("kind", json()) != "ExecCredential") return bad("has a kind other than ExecCredential");
  const json status = doc.value("status", json());
  if (!status.is_object()) return bad("has no status");
  ExecCredential cred;
  for (auto [field, into] : {std::pair{"token", &cred.token},
                             std::pair{"clientCertificateData", &cred.client_cert_pem},
                             std::pair{"clientKeyData", &cred.client_key_pem}}) {
    const json value = status.value(field, json());
    if (!value.is_null() && !value.is_string()) return bad(std::string("status.") + field + " is not a string");
    if (value.is_string()) *into = value.get<std::string>();
  }
  if (cred.token.empty() && cred.client_cert_pem.empty() && cred.client_key_pem.empty()) {
    return bad("has neither status.token nor status.clientCertificateData and clientKeyData");
  }
  if (cred.client_cert_pem.empty() != cred.client_key_pem.empty()) {
    return bad("has only one of status.clientCertificateData and status.clientKeyData");
  }
  if (!cred.client_cert_pem.empty() && (cred.client_cert_pem.find("-----BEGIN") == std::string::npos ||
                                        cred.client_key_pem.find("-----BEGIN") == std::string::npos)) {
    return bad("has a status.clientCertificateData or clientKeyData that is not PEM");
  }
  if (const json expiry = status.value("expirationTimestamp", json()); !expiry.is_null()) {
    auto t = expiry.is_string() ? ParseTime(expiry.get<std::string>()) : Status(Code::kInvalidArgument, "");
    if (!t.ok()) return bad("has a status.expirationTimestamp " + expiry.dump() + " that is not RFC 3339");
    cred.expiry = *t;
  }
  return cred;
}

Result<ExecCredential> RunExecPlugin(const ExecConfig& exec, std::chrono::milliseconds deadline) {
  std::vector<std::string> argv = {exec.command};
  argv.insert(argv.end(), exec.args.begin(), exec.args.end());
  CommandOptions options;
  options.extra_env = exec.env;
  options.extra_env.push_back("KUBERNETES_EXEC_INFO=" + exec.exec_info);
  auto run = RunCommand(argv, deadline, options);
  if (!run.ok()) {
    if (run.status().code() != Code::kNotFound) return Unauthenticated(exec, "could not run: " + run.status().message());
    return Unauthenticated(exec, "was not found (" + run.status().message() + ")" +
                                     (exec.install_hint.empty() ? "" : "\n" + exec.install_hint));
  }
  if (!run->success()) {
    const std::string how = run->timed_out ? "timed out after " + std::to_string(deadline.count()) + " ms"
                            : run->term_signal ? "was killed by signal " + std::to_string(run->term_signal)
                                               : "failed with exit code " + std::to_string(run->exit_code);
    spdlog::warn("exec credential plugin command={} result=error {}", exec.command, run->Summary());
    return Unauthenticated(exec, how + ": " + StderrTail(run->err));
  }
  auto cred = ParseExecCredential(run->out, exec.api_version, exec.where + " (plugin " + exec.command + ")");
  if (!cred.ok()) return cred.status();
  spdlog::info("exec credential plugin command={} result=ok token={} client_certificate={} expires={}",
               exec.command, !cred->token.empty(), !cred->client_cert_pem.empty(),
               cred->expiry ? FormatTime(*cred->expiry) : "never");
  return cred;
}

Result<ExecCredential> ExecCredentialSource::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ && (!cached_->expiry || !(now_() > *cached_->expiry))) return *cached_;
  cached_.reset();
  auto fresh = run_();
  if (!fresh.ok()) return fresh.status();
  cached_ = *fresh;
  return fresh;
}

void ExecCredentialSource::Invalidate(const std::string& token_used) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ && cached_->token == token_used) cached_.reset();
}

}  // namespace stasis
