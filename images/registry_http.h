// One HTTP exchange with a registry (or the storage it redirects to, or its token server) over
// a libcurl easy handle: no redirects followed (the client follows them itself, so that an
// Authorization header never reaches another host), TLS verified against the system store plus
// the operator's CA file, a connect timeout, a low-speed limit and an overall deadline. An
// internal piece of RegistryClient; nothing else includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "images/registry_client.h"

namespace stasis::images {

struct HttpCall {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Receives a 2xx body as it arrives, with the response's status (200 or 206: a sink that
  // asked for a range must know whether it got one); false aborts the transfer. Unset: the body
  // is kept in HttpReply::body, up to max_body bytes.
  std::function<bool(long status, const char* data, size_t n)> on_body;
  size_t max_body = 4 << 20;
};

struct HttpReply {
  long status = 0;               // 0 when no response came
  bool transport_error = false;  // connect, TLS, timeout, a transfer cut short
  std::string error;             // libcurl's words for it
  bool aborted = false;          // on_body said stop
  bool body_too_large = false;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower case
  std::string redirect_url;                    // absolute, for a 3xx with Location
  std::string Header(const std::string& name) const;
};

class RegistryHttp {
 public:
  // Reads the system bundle and options.ca_file once; a CA file that cannot be read fails
  // every call (kFailedPrecondition) rather than silently trusting less.
  explicit RegistryHttp(const RegistryClientOptions& options);
  ~RegistryHttp();
  HttpReply Perform(const HttpCall& call);

  // Whether two absolute URLs name the same scheme, host and port.
  static bool SameOrigin(const std::string& a, const std::string& b);

 private:
  struct Pool;
  RegistryClientOptions options_;
  std::string ca_blob_;   // system bundle + ca_file, PEM; empty: libcurl's default store
  std::string ca_error_;  // why ca_file could not be read
  std::unique_ptr<Pool> pool_;
};

}  // namespace stasis::images
