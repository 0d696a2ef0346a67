#include "tests/support/sandbox.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

fs::path MakeTemp(const std::string& prefix, const fs::path& parent = fs::temp_directory_path()) {
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return tmpl;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

const std::string& PinnedRunsc() {
  static const std::string path = [] {
    if (const char* env = std::getenv("STASIS_RUNSC"); env && *env) return std::string(env);
    auto r = RunCommand({std::string(STASIS_SOURCE_DIR) + "/hack/runsc.sh"}, 3600s);
    if (!r.ok() || !r->success()) {
      std::cerr << "hack/runsc.sh failed: " << (r.ok() ? r->err : r.status().ToString()) << "\n";
      std::abort();
    }
    return Trim(r->out);
  }();
  return path;
}

std::vector<std::string> CounterArgs() {
  return {"/bin/sh", "-c",
          "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done"};
}

long ReadCounterIn(const std::string& root, const std::string& id) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto r = RunCommand({PinnedRunsc(), "-root", root, "exec", id, "/bin/cat", "/tmp/counter"}, 30s);
    if (!r.ok() || !r->success()) return -1;
    if (r->out.find_first_of("0123456789") != std::string::npos) {
      try {
        return std::stol(r->out);
      } catch (...) {
        return -1;
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

const fs::path& TestBundleRoot() {
  static const fs::path root = [] {
    const fs::path r = fs::temp_directory_path() / "stasis-test-bundles";
    fs::create_directories(r);
    return r;
  }();
  return root;
}

Bundle::Bundle(const std::vector<std::string>& args, const fs::path& parent,
               const std::vector<std::string>& capabilities)
    : dir_(MakeTemp("stasis-bundle-", parent.empty() ? TestBundleRoot() : parent)) {
  const fs::path rootfs = dir_ / "rootfs";
  for (const char* d : {"bin", "proc", "dev", "sys", "tmp", "data", "etc"}) {
    fs::create_directories(rootfs / d);
  }
  fs::copy_file("/bin/busybox", rootfs / "bin" / "busybox");
  for (const char* applet : {"sh", "cat", "echo", "sleep", "ls", "test", "true", "wc", "hostname"}) {
    fs::create_symlink("busybox", rootfs / "bin" / applet);
  }
  nlohmann::json spec = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", args},
        {"env", {"PATH=/bin", "HOME=/"}},
        {"cwd", "/"},
        {"capabilities",
         {{"bounding", capabilities}, {"effective", capabilities}, {"permitted", capabilities}}},
        {"noNewPrivileges", true}}},
      {"root", {{"path", "rootfs"}, {"readonly", false}}},
      {"hostname", "stasis-test"},
      {"mounts",
       {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
        {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"},
         {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}}}},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}}}}}};
  std::ofstream(dir_ / "config.json") << spec.dump(2);
}

Bundle::~Bundle() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string HelperSpecForThisBuild(bool with_private_dir) {
  std::ifstream in(std::string(STASIS_SOURCE_DIR) + "/manifests/cdi/stasis-cuda-checkpoint.yaml");
  std::string helper((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string shipped = "hostPath: /usr/lib/stasis/cuda-checkpoint";
  int replaced = 0;
  for (auto at = helper.find(shipped); at != std::string::npos; at = helper.find(shipped, at + 1)) {
    helper.replace(at, shipped.size(), "hostPath: " + std::string(STASIS_BINARY_DIR) + "/cuda-checkpoint");
    ++replaced;
  }
  const auto directory = helper.rfind("        - hostPath: ");  // the last mount: the directory
  if (replaced != 2 || directory == std::string::npos) return "";
  if (!with_private_dir) helper.erase(directory);
  return helper;
}

RunscRoot::RunscRoot() : dir_(MakeTemp("stasis-runsc-root-")) {}

RunscRoot::~RunscRoot() {
  for (const auto& id : ids_) Run({"delete", "-force", id});
  // Safety net: a sandbox that `delete -force` did not end (seen after -leave-running under
  // load) must not outlive the test. Its processes name this root on their command line.
  (void)RunCommand({"pkill", "-9", "-f", "--", "--root=" + dir_.string() + " "}, 10s);
  // runsc -network=none bind-mounts an empty network namespace here and never unmounts it.
  umount2((dir_ / "null-netns").c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

CommandResult RunscRoot::Run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PinnedRunsc(), "-root", dir_.string(), "-network=none"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  // A detached sandbox keeps the container's stdio: never a pipe of ours.
  options.output_path = (dir_ / "runsc-output.log").string();
  auto r = RunCommand(argv, 120s, options);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = r.status().ToString();
    return failed;
  }
  return *r;
}

long RunscRoot::ReadCounter(const std::string& id) { return ReadCounterIn(dir_.string(), id); }

TempDir::TempDir(const std::string& prefix) : path_(MakeTemp(prefix)) {}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& content, bool executable) const {
  const fs::path p = path_ / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
  if (executable) fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                         fs::perms::others_read | fs::perms::others_exec);
  return p.string();
}

std::string TempDir::Read(const std::string& name) const {
  std::ifstream in(path_ / name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void PatchRunscVersion(const fs::path& checkpoint_img, const std::string& version) {
  std::ifstream in(checkpoint_img, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  in.close();
  ASSERT_GE(data.size(), 16u);
  ASSERT_EQ(data.substr(0, 8), "gVisorSF");
  uint64_t len = 0;
  for (int i = 8; i < 16; ++i) len = (len << 8) | static_cast<unsigned char>(data[i]);
  ASSERT_LE(16 + len, data.size());
  auto meta = nlohmann::json::parse(data.substr(16, len));
  ASSERT_TRUE(meta.contains("runsc_version"));
  meta["runsc_version"] = version;
  const std::string json = meta.dump();
  std::string header = "gVisorSF";
  for (int i = 7; i >= 0; --i) header.push_back(static_cast<char>((json.size() >> (8 * i)) & 0xff));
  std::ofstream out(checkpoint_img, std::ios::binary | std::ios::trunc);
  out << header << json << data.substr(16 + len);
}

}  // namespace stasis::testing
