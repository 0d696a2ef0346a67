// The self-contained cuda-checkpoint helper (build/cuda-checkpoint/: the helper, its glibc
// loader and libraries) in real runsc sandboxes whose root filesystems have every kind of C
// library, or none: (a) scratch with only a static busybox, (b) musl, (c) Debian 11 (glibc
// 2.31, older than the helper's build), (d) Debian 12. Each sandbox's bundle is the node
// agent's own (WriteGpuBundle): the project's helper spec pointed at this build, and a GPU spec
// that mounts the test stand-in libcuda.so.1 where NVIDIA's spec puts the driver's. The helper's
// --help, --get-state and --toggle run in each; with the spec's private directory left out, each
// fails and the preflight's message names the directory. No GPU: docs/gpu.md has the real run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/names.h"
#include "base/subprocess.h"
#include "reconcilers/node/helper_preflight.h"
#include "runtimes/gpu/gpu_bundle.h"
#include "runtimes/runsc_driver.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kHelper = api::kDefaultCudaCheckpointPath;

struct Root {
  std::string name;
  std::vector<std::string> args;  // the container's process: waits until deleted
};

void PrintTo(const Root& root, std::ostream* os) { *os << root.name; }

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A cached Debian root from hack/debian-rootfs.sh (mmdebstrap, built once per machine).
fs::path DebianRoot(const std::string& suite) {
  auto r = RunCommand({std::string(STASIS_SOURCE_DIR) + "/hack/debian-rootfs.sh", suite}, 300s);
  EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->Summary() + r->err : r.status().ToString());
  if (!r.ok() || !r->success()) return {};
  std::string path = r->out;
  while (!path.empty() && path.back() == '\n') path.pop_back();
  return path;
}

// A root with musl's loader and one program built against it (musl-gcc), nothing else.
fs::path MuslRoot(const fs::path& dir) {
  const fs::path root = dir / "musl-rootfs";
  for (const char* d : {"bin", "lib", "proc", "dev", "tmp"}) fs::create_directories(root / d);
  fs::copy_file("/lib/x86_64-linux-musl/libc.so", root / "lib" / "ld-musl-x86_64.so.1");
  std::ofstream(dir / "pause.c") << "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n";
  auto cc = RunCommand({"/usr/bin/musl-gcc", "-o", (root / "bin" / "pause").string(),
                        (dir / "pause.c").string()},
                       60s);
  EXPECT_TRUE(cc.ok() && cc->success())
      << "musl-gcc (hack/install-deps.sh: musl-tools): "
      << (cc.ok() ? cc->Summary() + cc->err : cc.status().ToString());
  return root;
}

// scratch: a static busybox and nothing else.
fs::path ScratchRoot(const fs::path& dir) {
  const fs::path root = dir / "scratch-rootfs";
  for (const char* d : {"bin", "proc", "dev", "tmp"}) fs::create_directories(root / d);
  fs::copy_file("/bin/busybox", root / "bin" / "busybox");
  return root;
}

class GpuHelperAnyImageTest : public ::testing::TestWithParam<Root> {
 protected:
  GpuHelperAnyImageTest() : driver_(PinnedRunsc()) {}
  ~GpuHelperAnyImageTest() override {
    for (const auto& ref : refs_) (void)driver_.Delete(ref);
  }

  // runsc creates the mount points of bind mounts (the helper, its directory, libcuda.so.1) in
  // the root filesystem itself, overlay or not: a Debian root is used through a tree of hard
  // links of its own, so the cached root is never written.
  fs::path RootFor(const std::string& name) {
    if (name == "scratch") return ScratchRoot(dir_.path());
    if (name == "musl") return MuslRoot(dir_.path());
    const fs::path cached = DebianRoot(name == "debian11" ? "bullseye" : "bookworm");
    if (cached.empty()) return {};
    const fs::path linked = dir_.path() / (name + "-rootfs");
    auto cp = RunCommand({"/bin/cp", "-a", "-l", cached.string(), linked.string()}, 120s);
    EXPECT_TRUE(cp.ok() && cp->success()) << (cp.ok() ? cp->Summary() + cp->err : cp.status().ToString());
    return linked;
  }

  // The CDI specs: the shipped helper spec on this build's directory (without the private
  // directory's mount when asked), and a GPU whose only edit is the stand-in driver library.
  std::string WriteCdi(bool with_private_dir) {
    const fs::path cdi = dir_.path() / (with_private_dir ? "cdi" : "cdi-outdated");
    fs::create_directories(cdi);
    const std::string helper = HelperSpecForThisBuild(with_private_dir);
    EXPECT_FALSE(helper.empty()) << "the shipped helper spec changed";
    std::ofstream(cdi / "helper.yaml") << helper;
    std::ofstream(cdi / "gpu.yaml")
        << "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n  - name: GPU-fake\n"
           "    containerEdits:\n      mounts:\n        - hostPath: "
        << STASIS_BINARY_DIR << "/tests/fake-libcuda-r580/libcuda.so.1\n"
        << "          containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
           "          options: [ro, nosuid, nodev, bind]\n";
    return cdi.string();
  }

  // The actor's bundle over `rootfs` (read-only: the Debian roots are a shared cache), the
  // agent's GPU bundle derived from it, and a sandbox running it.
  SandboxRef Start(const fs::path& rootfs, const std::vector<std::string>& args,
                   const std::string& cdi_dir, const std::string& suffix) {
    const fs::path source = dir_.path() / ("bundle-" + suffix);
    fs::create_directories(source);
    json spec = {{"ociVersion", "1.0.2"},
                 {"process",
                  {{"user", {{"uid", 0}, {"gid", 0}}},
                   {"args", args},
                   {"env", {"PATH=/usr/bin:/bin"}},
                   {"cwd", "/"}}},
                 {"root", {{"path", rootfs.string()}, {"readonly", true}}},
                 {"mounts",
                  {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
                   {{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"}}}},
                 {"linux", {{"namespaces", {{{"type", "pid"}}, {{"type", "mount"}}}}}}};
    std::ofstream(source / "config.json") << spec.dump(2);
    auto cdi = CdiRegistry::Load({cdi_dir});
    EXPECT_TRUE(cdi.ok()) << cdi.status().ToString();
    GpuBundleRequest request;
    request.source_bundle = source.string();
    request.out_dir = (dir_.path() / ("gpu-bundle-" + suffix)).string();
    request.gpu_uuids = {"GPU-fake"};
    request.cuda_checkpoint_path = kHelper;
    request.helper_private_dir = api::kCudaCheckpointPrivateDir;
    auto bundle = WriteGpuBundle(*cdi, request);
    EXPECT_TRUE(bundle.ok()) << bundle.status().ToString();
    const std::string id = GetParam().name + "-" + suffix + "-" + std::to_string(getpid());
    SandboxRef ref{id, root_.dir().string(), bundle.ok() ? *bundle : "",
                   (root_.dir() / (id + ".log")).string()};
    ref.shared_rootfs = true;  // the sandbox's writes in its own upper layer, as for images
    root_.Track(id);
    refs_.push_back(ref);
    Status run = driver_.Run(ref, 60s);
    EXPECT_TRUE(run.ok()) << run.ToString() << "\n" << ReadText(ref.log_path);
    return ref;
  }

  ExecResult Exec(const SandboxRef& ref, std::vector<std::string> argv,
                  std::vector<std::string> env = {}) {
    ExecRequest request{std::move(argv), std::move(env), 30s};
    auto r = driver_.Exec(ref, request);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ExecResult{};
  }

  TempDir dir_{"stasis-helper-roots-"};
  RunscRoot root_;
  RunscDriver driver_;
  std::vector<SandboxRef> refs_;
};

TEST_P(GpuHelperAnyImageTest, TheHelperRunsOnItsOwnCLibrary) {
  const fs::path rootfs = RootFor(GetParam().name);
  ASSERT_FALSE(rootfs.empty());
  SandboxRef ref = Start(rootfs, GetParam().args, WriteCdi(/*with_private_dir=*/true), "ok");

  ExecResult help = Exec(ref, {kHelper, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out + help.err, HasSubstr("--toggle"));
  // The stand-in driver answers from its environment: the helper reached it through dlopen.
  ExecResult state = Exec(ref, {kHelper, "--get-state", "--pid", "1"},
                          {"FAKE_LIBCUDA_STATE=checkpointed"});
  EXPECT_EQ(state.exit_code, 0) << state.err;
  EXPECT_EQ(state.out, "checkpointed\n");
  for (const char* from : {"running", "checkpointed"}) {
    ExecResult toggle = Exec(ref, {kHelper, "--toggle", "--pid", "1"},
                             {std::string("FAKE_LIBCUDA_STATE=") + from});
    EXPECT_EQ(toggle.exit_code, 0) << from << ": " << toggle.err;
    EXPECT_EQ(toggle.err, "") << from;
  }
}

TEST_P(GpuHelperAnyImageTest, WithoutItsPrivateDirectoryThePreflightSaysSo) {
  const fs::path rootfs = RootFor(GetParam().name);
  ASSERT_FALSE(rootfs.empty());
  SandboxRef ref = Start(rootfs, GetParam().args, WriteCdi(/*with_private_dir=*/false), "outdated");

  // The two commands the node agent's preflight runs (checkpoint.cc), judged as it judges them.
  ExecResult help = Exec(ref, {kHelper, "--help"});
  EXPECT_NE(help.exit_code, 0) << help.out;
  ExecResult loader = Exec(ref, {api::kCudaCheckpointPrivateLoader, "--help"});
  EXPECT_NE(loader.exit_code, 0) << loader.out;
  Status preflight = JudgeHelperPreflight(kHelper, HelperRun{help.exit_code, help.err},
                                          HelperRun{loader.exit_code, loader.err});
  EXPECT_EQ(preflight.reason(), "cuda_checkpoint_missing");
  EXPECT_THAT(preflight.message(),
              HasSubstr(std::string("private directory ") + api::kCudaCheckpointPrivateDir +
                        " is not in the container"));
}

INSTANTIATE_TEST_SUITE_P(
    Roots, GpuHelperAnyImageTest,
    ::testing::Values(Root{"scratch", {"/bin/busybox", "sleep", "1000"}},
                      Root{"musl", {"/bin/pause"}},
                      Root{"debian11", {"/bin/sleep", "1000"}},
                      Root{"debian12", {"/bin/sleep", "1000"}}),
    [](const ::testing::TestParamInfo<Root>& info) { return info.param.name; });

}  // namespace
}  // namespace stasis::testing
