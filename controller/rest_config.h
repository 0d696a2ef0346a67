// How to reach and authenticate to an API server: the C++ counterpart of client-go's
// rest.Config. Built from a kubeconfig (its current context) or from the in-cluster service
// account. TLS is always verified against a CA; there is no "insecure" switch.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "base/status.h"

namespace stasis {

struct RestConfig {
  std::string server;           // "https://host:port", no trailing slash
  std::string ca_pem;           // PEM of the CA bundle that signs the server certificate
  std::string client_cert_pem;  // client certificate authentication (both or neither)
  std::string client_key_pem;
  // Bearer token authentication. A function, not a string: in-cluster tokens rotate and are
  // re-read from disk (client-go re-reads at most once a minute; so do we).
  std::function<std::string()> bearer_token;
  std::string user_agent = "stasis";
  // Act as another user (client-go's rest.ImpersonationConfig): sent as Impersonate-User,
  // Impersonate-Group and Impersonate-Extra-<key> headers; "" = as ourselves. One group and
  // one value per extra key: cpprest joins repeated headers into one, which the API server
  // would read as a single value.
  std::string impersonate_user;
  std::string impersonate_group;
  std::map<std::string, std::string> impersonate_extra;
  // Bounds on what the server may send: a whole response body, and one line of a watch.
  // A paged list (500 objects) or one object at the API server's own 3 MiB request limit fits.
  size_t max_response_bytes = 64u << 20;
  size_t max_line_bytes = 16u << 20;
};

// Loads the kubeconfig at `path` (YAML or JSON) and returns the current context's config.
// Supports certificate-authority(-data), client-certificate(-data), client-key(-data), token
// and tokenFile; relative file paths are resolved against the kubeconfig's directory.
// Every malformed case is kInvalidArgument with a message naming the file and the field.
Result<RestConfig> LoadKubeconfig(const std::string& path);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account CA and token under `sa_dir`
// (default /var/run/secrets/kubernetes.io/serviceaccount). The token is re-read when it
// changes on disk.
Result<RestConfig> LoadInClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// --kubeconfig flag, then $KUBECONFIG, then in-cluster, then ~/.kube/config.
Result<RestConfig> LoadRestConfig(const std::string& kubeconfig_flag);

}  // namespace stasis
