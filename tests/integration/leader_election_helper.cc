// A leader-election candidate as a process of its own, for leader_election_test's
// two-process case: contends for a Lease until SIGTERM/SIGINT (then stops and releases, exit
// 0) or SIGKILL (then it just vanishes, as a crashed controller does).
//
//   leader_election_helper KUBECONFIG NAMESPACE LEASE IDENTITY
//
// Prints "started_leading" / "stopped_leading" lines on stdout as they happen.
#include <csignal>
#include <cstdio>

#include "controller/kube_client.h"
#include "controller/leader_election.h"
#include "controller/rest_config.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s KUBECONFIG NAMESPACE LEASE IDENTITY\n", argv[0]);
    return 2;
  }
  // Blocked before any thread starts, so every thread inherits the mask and sigwait below
  // is the only receiver.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config = stasis::LoadKubeconfig(argv[1]);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  stasis::KubeClient client(stasis::NewCpprestTransport(*config));
  stasis::LeaderElectionConfig le;
  le.lease_namespace = argv[2];
  le.lease_name = argv[3];
  le.identity = argv[4];
  le.on_started_leading = [] {
    std::printf("started_leading\n");
    std::fflush(stdout);
  };
  le.on_stopped_leading = [] {
    std::printf("stopped_leading\n");
    std::fflush(stdout);
  };
  auto elector = stasis::LeaderElector::New(client, le);
  if (!elector.ok()) {
    std::fprintf(stderr, "%s\n", elector.status().ToString().c_str());
    return 1;
  }
  (*elector)->Start();
  int sig = 0;
  sigwait(&signals, &sig);
  (*elector)->Stop();
  return 0;
}
