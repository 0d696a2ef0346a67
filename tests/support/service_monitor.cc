#include "tests/support/service_monitor.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace stasis::testing {
namespace {

// Prometheus' meta label for a Kubernetes label: every character outside [A-Za-z0-9_] is `_`.
std::string Sanitized(const std::string& label) {
  std::string out = label;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return out;
}

YAML::Node Relabel(const std::vector<std::string>& sources, const std::string& target,
                   const std::string& regex = "", const std::string& replacement = "") {
  YAML::Node r;
  if (!sources.empty()) {
    r["source_labels"] = YAML::Node(YAML::NodeType::Sequence);
    for (const auto& s : sources) r["source_labels"].push_back(s);
  }
  if (!regex.empty()) r["regex"] = regex;
  r["target_label"] = target;
  if (!replacement.empty()) r["replacement"] = replacement;
  r["action"] = "replace";
  return r;
}

YAML::Node Keep(const std::vector<std::string>& sources, const std::string& regex, const char* action = "keep") {
  YAML::Node r;
  for (const auto& s : sources) r["source_labels"].push_back(s);
  r["regex"] = regex;
  r["action"] = action;
  return r;
}

// The operator's relabelling, in its order: select the Service by its labels and the endpoint
// by its port's name, add the standard target labels, drop pods that ended.
void AddOperatorRelabelings(const YAML::Node& monitor, const YAML::Node& endpoint, YAML::Node& out) {
  for (const auto& kv : monitor["spec"]["selector"]["matchLabels"]) {
    const std::string label = Sanitized(kv.first.as<std::string>());
    out.push_back(Keep({"__meta_kubernetes_service_label_" + label, "__meta_kubernetes_service_labelpresent_" + label},
                       "(" + kv.second.as<std::string>() + ");true"));
  }
  const std::string port = endpoint["port"].as<std::string>();
  out.push_back(Keep({"__meta_kubernetes_endpoint_port_name"}, port));
  out.push_back(Relabel({"__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"},
                        "node", "Node;(.*)", "${1}"));
  out.push_back(Relabel({"__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"},
                        "pod", "Pod;(.*)", "${1}"));
  out.push_back(Relabel({"__meta_kubernetes_namespace"}, "namespace"));
  out.push_back(Relabel({"__meta_kubernetes_service_name"}, "service"));
  out.push_back(Relabel({"__meta_kubernetes_pod_name"}, "pod"));
  out.push_back(Relabel({"__meta_kubernetes_pod_container_name"}, "container"));
  out.push_back(Keep({"__meta_kubernetes_pod_phase"}, "(Failed|Succeeded)", "drop"));
  out.push_back(Relabel({"__meta_kubernetes_service_name"}, "job", "", "${1}"));
  out.push_back(Relabel({}, "endpoint", "", port));
}

// A ServiceMonitor relabeling (camelCase) as a Prometheus relabel_config (snake_case).
Result<YAML::Node> RelabelConfig(const YAML::Node& r) {
  static const std::map<std::string, std::string> kFields = {
      {"action", "action"},         {"sourceLabels", "source_labels"}, {"separator", "separator"},
      {"targetLabel", "target_label"}, {"regex", "regex"},             {"modulus", "modulus"},
      {"replacement", "replacement"}};
  YAML::Node out;
  for (const auto& kv : r) {
    const std::string key = kv.first.as<std::string>();
    auto it = kFields.find(key);
    if (it == kFields.end()) return Status(Code::kInvalidArgument, "relabeling field " + key + " is not supported");
    out[it->second] = kv.second;
  }
  return out;
}

Result<YAML::Node> ScrapeConfig(const YAML::Node& monitor, const YAML::Node& endpoint, size_t index,
                                const ServiceDiscoveryAccess& access) {
  static const std::set<std::string> kEndpointFields = {"port", "path", "scheme", "bearerTokenFile", "tlsConfig",
                                                        "interval", "scrapeTimeout", "relabelings"};
  for (const auto& kv : endpoint) {
    if (!kEndpointFields.count(kv.first.as<std::string>())) {
      return Status(Code::kInvalidArgument, "endpoint field " + kv.first.as<std::string>() + " is not supported");
    }
  }
  if (!endpoint["port"]) return Status(Code::kInvalidArgument, "an endpoint without a port name");
  const std::string ns = monitor["metadata"]["namespace"].as<std::string>();
  YAML::Node c;
  c["job_name"] = "serviceMonitor/" + ns + "/" + monitor["metadata"]["name"].as<std::string>() + "/" +
                  std::to_string(index);
  c["honor_labels"] = false;
  YAML::Node sd;
  sd["role"] = "endpoints";
  sd["api_server"] = access.api_server;
  sd["tls_config"]["ca_file"] = access.ca_file;
  sd["tls_config"]["cert_file"] = access.client_cert_file;
  sd["tls_config"]["key_file"] = access.client_key_file;
  for (const auto& n : monitor["spec"]["namespaceSelector"]["matchNames"]) sd["namespaces"]["names"].push_back(n);
  if (!sd["namespaces"]) sd["namespaces"]["names"].push_back(ns);
  c["kubernetes_sd_configs"].push_back(sd);
  const std::string interval = access.scrape_interval.empty() ? endpoint["interval"].as<std::string>("30s")
                                                              : access.scrape_interval;
  c["scrape_interval"] = interval;
  c["scrape_timeout"] = access.scrape_interval.empty() ? endpoint["scrapeTimeout"].as<std::string>("10s") : interval;
  c["metrics_path"] = endpoint["path"].as<std::string>("/metrics");
  c["scheme"] = endpoint["scheme"].as<std::string>("http");
  if (endpoint["bearerTokenFile"]) c["authorization"]["credentials_file"] = access.scrape_token_file;
  if (endpoint["tlsConfig"]) c["tls_config"]["insecure_skip_verify"] = endpoint["tlsConfig"]["insecureSkipVerify"].as<bool>(false);
  YAML::Node relabel(YAML::NodeType::Sequence);
  AddOperatorRelabelings(monitor, endpoint, relabel);
  for (const auto& r : endpoint["relabelings"]) {
    auto rc = RelabelConfig(r);
    if (!rc.ok()) return rc.status();
    relabel.push_back(*rc);
  }
  c["relabel_configs"] = relabel;
  return c;
}

}  // namespace

Result<std::string> ScrapeConfigsFor(const std::filesystem::path& path, const ServiceDiscoveryAccess& access) {
  if (!std::filesystem::exists(path)) return Status(Code::kNotFound, path.string() + " does not exist");
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAllFromFile(path.string());
  } catch (const YAML::Exception& e) {
    return Status(Code::kInvalidArgument, path.string() + ": " + e.what());
  }
  YAML::Node configs(YAML::NodeType::Sequence);
  for (const auto& monitor : docs) {
    if (!monitor || monitor.IsNull()) continue;
    if (monitor["kind"].as<std::string>("") != "ServiceMonitor") {
      return Status(Code::kInvalidArgument, path.string() + ": a document that is not a ServiceMonitor");
    }
    try {
      size_t index = 0;
      for (const auto& endpoint : monitor["spec"]["endpoints"]) {
        auto c = ScrapeConfig(monitor, endpoint, index++, access);
        if (!c.ok()) return Status(c.status().code(), path.string() + ": " + c.status().message());
        configs.push_back(*c);
      }
    } catch (const YAML::Exception& e) {
      return Status(Code::kInvalidArgument, path.string() + ": " + e.what());
    }
  }
  if (configs.size() == 0) return Status(Code::kInvalidArgument, path.string() + ": no ServiceMonitor endpoint");
  YAML::Emitter emitter;
  emitter << configs;
  return std::string(emitter.c_str()) + "\n";
}

}  // namespace stasis::testing
