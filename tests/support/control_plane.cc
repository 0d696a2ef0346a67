#include "tests/support/control_plane.h"

#include "controller/rest_config.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;

const std::string kScript = std::string(STASIS_SOURCE_DIR) + "/hack/control-plane.sh";

CommandResult MustRun(const std::vector<std::string>& argv, std::chrono::milliseconds deadline) {
  auto r = RunCommand(argv, deadline);
  if (!r.ok()) {
    std::cerr << "cannot run " << argv[0] << ": " << r.status().ToString() << "\n";
    std::abort();
  }
  return *r;
}

std::string ReadFile(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

ControlPlane& ControlPlane::Get() {
  static ControlPlane* instance = [] {
    auto* cp = new ControlPlane();
    char tmpl[] = "/tmp/stasis-test-cp-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    cp->dir_ = tmpl;
    // Building the binaries on a cold machine takes many minutes; a warm start takes seconds.
    CommandOptions options;
    options.extra_env = {"STASIS_CP_OWNER_PID=" + std::to_string(getpid())};
    auto r = RunCommand({kScript, "up", "--dir", cp->dir_}, 3600s, options);
    if (!r.ok()) {
      std::cerr << "cannot run " << kScript << ": " << r.status().ToString() << "\n";
      std::abort();
    }
    if (!r->success()) {
      std::cerr << "hack/control-plane.sh up failed (" << r->Summary() << ")\n" << r->err << r->out;
      cp->Stop();
      std::abort();
    }
    cp->kubeconfig_ = cp->dir_ + "/kubeconfig";
    cp->server_ = "https://127.0.0.1:" + ReadFile(cp->dir_ + "/apiserver.port");
    std::atexit([] { Get().Stop(); });
    return cp;
  }();
  return *instance;
}

std::unique_ptr<KubeClient> ControlPlane::NewClient(KubeClient::Observer observe) const {
  auto config = LoadKubeconfig(kubeconfig_);
  if (!config.ok()) {
    std::cerr << "cannot load " << kubeconfig_ << ": " << config.status().ToString() << "\n";
    std::abort();
  }
  return std::make_unique<KubeClient>(NewCpprestTransport(*config), std::move(observe));
}

CommandResult ControlPlane::Kubectl(const std::vector<std::string>& args,
                                    const std::string& stdin_data) const {
  std::vector<std::string> argv = {"kubectl", "--kubeconfig=" + kubeconfig_};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.stdin_data = stdin_data;
  auto r = RunCommand(argv, 60s, options);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = r.status().ToString();
    return failed;
  }
  return *r;
}

std::string ControlPlane::CreateTestNamespace(const std::string& prefix) const {
  std::string ns = prefix + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::transform(ns.begin(), ns.end(), ns.begin(), [](unsigned char c) { return std::tolower(c); });
  auto r = Kubectl({"create", "namespace", ns});
  if (r.exit_code != 0) {
    ADD_FAILURE() << "create namespace " << ns << ": " << r.err;
    return "";
  }
  return ns;
}

std::string ControlPlane::InstallStasisApi() const {
  auto failed = [](const std::string& step, const CommandResult& r) {
    return step + ": " + r.Summary() + "\n" + r.err;
  };
  auto r = Kubectl({"apply", "-f", std::string(STASIS_SOURCE_DIR) + "/manifests/crd/"});
  if (!r.success()) return failed("kubectl apply", r);
  r = Kubectl({"wait", "--for=condition=Established", "--timeout=60s", "crd/actors.stasis.dev",
               "crd/actortemplates.stasis.dev", "crd/workers.stasis.dev"});
  if (!r.success()) return failed("kubectl wait", r);
  r = Kubectl({"create", "namespace", "stasis-system"});
  if (!r.success() && r.err.find("AlreadyExists") == std::string::npos) return failed("kubectl create namespace", r);
  return "";
}

void ControlPlane::RestartApiServer() {
  auto r = MustRun({kScript, "restart-apiserver", "--dir", dir_}, 180s);
  if (!r.success()) {
    std::cerr << "restart-apiserver failed: " << r.Summary() << "\n" << r.err;
    std::abort();
  }
}

void ControlPlane::Stop() {
  if (dir_.empty()) return;
  auto r = RunCommand({kScript, "down", "--dir", dir_}, 120s);
  if (!r.ok() || !r->success()) {
    std::cerr << "hack/control-plane.sh down failed: "
              << (r.ok() ? r->Summary() + "\n" + r->err : r.status().ToString()) << "\n";
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  dir_.clear();
}

}  // namespace stasis::testing
