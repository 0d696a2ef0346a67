// A real OCI registry (the distribution project's docker-registry) for a test binary, started
// by hack/registry.sh in a temporary directory on a free loopback port, the way ObjectStore
// starts SeaweedFS: TLS with a CA of its own, htpasswd auth unless asked without, a suite may
// stop it and start it again (the same data, port and credentials), and it stops for good when
// the object is destroyed. Nothing is mocked; a registry that cannot start is a failure.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "images/registry_credentials.h"
#include "tests/support/object_store.h"

namespace stasis::testing {

struct TestRegistryOptions {
  bool auth = true;         // htpasswd; false: anonymous pulls and pushes
  // Bearer tokens from the distribution project's token server (hack/registry.sh --token),
  // which grants the user only repositories under "<user>/".
  bool token = false;
  bool plain_http = false;  // HTTP without TLS (an insecure registry)
  // Blobs in this store's bucket, blob GETs redirected there (hack/registry.sh --s3); the
  // store must outlive the registry.
  const ObjectStore* store = nullptr;
};

class TestRegistry {
 public:
  // Starts a registry in a new temporary directory. On failure returns nullptr and sets
  // `error` to the script's output.
  static std::unique_ptr<TestRegistry> Start(std::string* error,
                                             const TestRegistryOptions& options = {});
  ~TestRegistry();  // down, and the directory removed

  const std::string& host() const { return host_; }        // "127.0.0.1:PORT"
  const std::string& ca_file() const { return ca_file_; }  // PEM; its directory is a --cert-dir
  const std::string& dir() const { return dir_; }
  bool plain_http() const { return options_.plain_http; }
  // The user and password, or nullopt for a registry without auth.
  const std::optional<images::BasicCredentials>& credentials() const { return credentials_; }
  // The token server's endpoint (the challenge's realm), or "" without --token.
  const std::string& realm() const { return realm_; }
  // Where the registry keeps the blob `digest` ("sha256:…") on disk.
  std::string BlobDataPath(const std::string& digest) const;

  // hack/registry.sh down / up on the same directory. "" when done, else what failed.
  std::string Stop();
  std::string Restart();
  // Stops only the token server; Restart() brings it back with the same key and port.
  std::string StopTokenServer();
  // A new signing key for the token server, which the registry then trusts instead of the old
  // one: every token issued before is refused from then on. Both are restarted.
  std::string RotateTokenKey();

 private:
  TestRegistry() = default;
  std::string Up();

  std::string dir_;
  std::string host_;
  std::string ca_file_;
  std::string realm_;
  std::optional<images::BasicCredentials> credentials_;
  TestRegistryOptions options_;
  std::vector<std::string> s3_env_;  // the store's settings, for --s3
};

}  // namespace stasis::testing
