// A real S3-compatible object store (SeaweedFS) for a test binary, started by
// hack/object-store.sh in a temporary directory on free loopback ports, the way ControlPlane
// starts kube-apiserver: a test suite starts one, may stop it and start it again (the same
// data, ports and credentials: a store that went away and came back), and stops it for good
// when the object is destroyed. Nothing is mocked; a store that cannot start is a failure.
#pragma once

#include <memory>
#include <string>

#include "snapshots/s3_location.h"

namespace stasis::testing {

class ObjectStore {
 public:
  // Starts a store in a new temporary directory. On failure returns nullptr and sets `error`
  // to the script's output (a missing `weed` that cannot be built, a port clash…).
  static std::unique_ptr<ObjectStore> Start(std::string* error);
  ~ObjectStore();  // down, and the directory removed

  const S3Endpoint& endpoint() const { return endpoint_; }
  const std::string& bucket() const { return bucket_; }
  const std::string& dir() const { return dir_; }

  // hack/object-store.sh down / up on the same directory. "" when done, else what failed.
  std::string Stop();
  std::string Restart();

 private:
  ObjectStore() = default;
  std::string Up();  // runs `up`, reads its export lines into endpoint_ and bucket_

  std::string dir_;
  S3Endpoint endpoint_;
  std::string bucket_;
};

}  // namespace stasis::testing
