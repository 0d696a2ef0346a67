// The Prometheus scrape configuration a Prometheus Operator generates from a ServiceMonitor, for
// a Prometheus the tests start outside the cluster: `kubernetes_sd_configs` (role endpoints)
// against the cluster's API server, the operator's relabelling (the Service's labels selected,
// the endpoint port by name, namespace/service/pod/container/job/endpoint target labels, pods
// that ended dropped), then the ServiceMonitor's own relabelings. This keeps the shipped
// ServiceMonitors the one source of the `job` and `node` labels the rules and the dashboard use.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"

namespace stasis::testing {

struct ServiceDiscoveryAccess {
  std::string api_server;        // https://HOST:PORT
  std::string ca_file;           // the cluster CA, for the API server and nothing else
  std::string client_cert_file;  // a client certificate allowed to list endpoints, services, pods
  std::string client_key_file;
  // Replaces the ServiceMonitor's bearerTokenFile (the in-cluster token path): a token of a
  // ServiceAccount bound to the role that may GET /metrics.
  std::string scrape_token_file;
  // Replaces each endpoint's interval (and bounds its scrapeTimeout), so a test need not wait
  // the shipped 15 s between scrapes. Empty: the ServiceMonitor's own.
  std::string scrape_interval;
};

// The `scrape_configs` entries (YAML, a block sequence) for every endpoint of every ServiceMonitor in `path` (a multi-document
// YAML file). Errors: kNotFound (no file), kInvalidArgument (not YAML, a document that is not a
// ServiceMonitor, or a field this translation does not support, named).
Result<std::string> ScrapeConfigsFor(const std::filesystem::path& path, const ServiceDiscoveryAccess& access);

}  // namespace stasis::testing
