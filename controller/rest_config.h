// How to reach and authenticate to an API server: the C++ counterpart of client-go's
// rest.Config. Built from a kubeconfig (its current context) or from the in-cluster service
// account. TLS is always verified against a CA; there is no "insecure" switch.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

struct RestConfig {
  std::string server;           // "https://host:port", no trailing slash
  std::string ca_pem;           // PEM of the CA bundle that signs the server certificate
  std::string client_cert_pem;  // client certificate authentication (both or neither)
  std::string client_key_pem;
  // Bearer token authentication. A function, not a string: in-cluster tokens rotate and are
  // re-read from disk (client-go re-reads at most once a minute; so do we), and an exec
  // credential plugin is run again when its token expires. An error (a plugin that failed)
  // fails the request with it.
  std::function<Result<std::string>()> bearer_token;
  // Told the token a request carried when the server answered 401, so that a plugin's cached
  // token is dropped and the plugin run again for the next request (client-go does the same).
  std::function<void(const std::string& token_used)> on_unauthorized;
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
// Supports certificate-authority(-data), client-certificate(-data), client-key(-data), token,
// tokenFile and exec credential plugins (controller/exec_credential.h); relative file paths
// are resolved against the kubeconfig's directory.
// Every malformed case is kInvalidArgument with a message naming the file and the field.
// An exec plugin runs once here, so that a broken one stops the process at start with its
// error (kUnauthenticated); a client certificate it returns is used from then on (not
// rotated), a token it returns is run for again when it expires or after a 401.
Result<RestConfig> LoadKubeconfig(const std::string& path);

// The same over several files merged as kubectl merges a KUBECONFIG list
// (controller/kubeconfig_merge.h): the first file to define a cluster, user or context wins,
// current-context comes from the first file that sets it, missing files are skipped.
Result<RestConfig> LoadKubeconfigList(const std::vector<std::string>& paths);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account CA and token under `sa_dir`
// (default /var/run/secrets/kubernetes.io/serviceaccount). The token is re-read when it
// changes on disk.
Result<RestConfig> LoadInClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// --kubeconfig flag (one file), then $KUBECONFIG (a ':'-separated list, merged), then
// in-cluster, then ~/.kube/config.
Result<RestConfig> LoadRestConfig(const std::string& kubeconfig_flag);

}  // namespace stasis
