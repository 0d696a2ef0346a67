// The options of the secure metrics endpoint, apart from the manager (manager.h) so that the
// roles' option structs can carry them without the manager's includes.
#pragma once

#include <chrono>
#include <string>

namespace stasis {

// /metrics over HTTPS, only for those the API server authenticates (TokenReview) and
// authorizes (SubjectAccessReview: `get` on the non-resource URL /metrics), as kubebuilder
// projects serve it. The probes stay plain HTTP on their own address, for the kubelet.
struct SecureMetricsOptions {
  bool enabled = false;
  // tls.crt and tls.key; "" = a self-signed certificate generated at start.
  std::string cert_dir;
  // The decision cache (metrics_authorizer.h); tests shorten it.
  std::chrono::seconds allow_ttl{60};
  std::chrono::seconds deny_ttl{10};
};

}  // namespace stasis
