// A real kube-apiserver and etcd for a test binary, started once (on first use) by
// hack/control-plane.sh in a temporary directory on free loopback ports, and stopped at
// exit: the envtest model. Tests get a kubeconfig with an admin client certificate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "controller/kube_client.h"

#include "base/subprocess.h"

namespace stasis::testing {

class ControlPlane {
 public:
  // Starts the control plane the first time it is called in this process; aborts the test
  // binary with the script's output when it cannot start. Stopped by an atexit hook.
  static ControlPlane& Get();

  const std::string& dir() const { return dir_; }                // the instance directory
  const std::string& kubeconfig() const { return kubeconfig_; }  // admin kubeconfig
  const std::string& server() const { return server_; }          // https://127.0.0.1:PORT

  // A REST client authenticated as the admin (its own connections each call). Aborts the test
  // binary when the kubeconfig cannot be loaded.
  // `observe` sees every request (method, HTTP code), as the agents' metrics do.
  std::unique_ptr<KubeClient> NewClient(KubeClient::Observer observe = nullptr) const;

  // kubectl --kubeconfig=<admin> ARGS…, argv only, 60 s deadline.
  CommandResult Kubectl(const std::vector<std::string>& args,
                        const std::string& stdin_data = "") const;

  // Creates a namespace of the running test's own, "<prefix>-<test name in lower case>", and
  // returns its name; "" (with the test failed) when kubectl could not.
  std::string CreateTestNamespace(const std::string& prefix) const;

  // stasis's API in this control plane: applies manifests/crd/, waits until every CRD is
  // Established, creates the namespace stasis-system. "" when done, else what failed.
  std::string InstallStasisApi() const;

  // Stops and starts kube-apiserver only (etcd keeps the data): for restart tests.
  void RestartApiServer();
  void Stop();

 private:
  ControlPlane() = default;
  std::string dir_, kubeconfig_, server_;
};

}  // namespace stasis::testing
