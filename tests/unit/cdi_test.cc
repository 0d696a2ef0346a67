// CDI specs (reconcilers/cdi.h) and the GPU runtime bundle built from them
// (reconcilers/gpu_bundle.h): parsing with errors that name the file and field, the
// precedence of CDI directories, resolution of qualified device names, and the edits as they
// land in config.json. Device nodes are read from the host for real (/dev/null is 1:3 on
// every Linux); the project's own manifests/cdi/stasis-cuda-checkpoint.yaml is parsed as
// shipped.
#include "runtimes/gpu/cdi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "api/names.h"
#include "runtimes/gpu/gpu_bundle.h"
#include "runtimes/gpu/gpu_discovery.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The shape `nvidia-ctk cdi generate --device-name-strategy=uuid` writes (trimmed).
constexpr const char* kGpuSpec = R"(cdiVersion: 0.6.0
kind: nvidia.com/gpu
containerEdits:
  env:
    - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
    - path: /dev/null
  mounts:
    - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
      containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
      options: [ro, nosuid, nodev, bind]
  hooks:
    - hookName: createContainer
      path: /usr/bin/nvidia-cdi-hook
      args: [nvidia-cdi-hook, update-ldcache]
devices:
  - name: GPU-aaaa
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: /dev/zero
  - name: GPU-bbbb
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia1
          type: c
          major: 195
          minor: 1
          fileMode: 438
)";

std::string HelperSpecText() {
  std::ifstream in(std::string(STASIS_SOURCE_DIR) + "/manifests/cdi/stasis-cuda-checkpoint.yaml");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CdiSpec, ParsesTheProjectsHelperSpecAsShipped) {
  auto spec = ParseCdiSpec(HelperSpecText(), "stasis-cuda-checkpoint.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, "stasis.dev/cuda-checkpoint");
  ASSERT_EQ(spec->devices.count("helper"), 1u);
  const auto& mounts = spec->devices.at("helper").mounts;
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].host_path, "/usr/lib/stasis/cuda-checkpoint/stasis-cuda-checkpoint");
  EXPECT_EQ(mounts[0].container_path, api::kDefaultCudaCheckpointPath);
  EXPECT_THAT(mounts[0].options, ::testing::Contains("ro"));
  // The private directory, where the helper's interpreter and RPATH point.
  EXPECT_EQ(mounts[1].host_path, "/usr/lib/stasis/cuda-checkpoint");
  EXPECT_EQ(mounts[1].container_path, api::kCudaCheckpointPrivateDir);
  EXPECT_THAT(mounts[1].options, ::testing::IsSupersetOf({"ro", "nosuid", "nodev", "rbind"}));
  EXPECT_EQ(std::string(api::kCudaCheckpointPrivateLoader).rfind(api::kCudaCheckpointPrivateDir, 0),
            0u);
}

TEST(PlaceHelperMounts, MovesTheHelperAndKeepsItsPrivateDirectory) {
  const std::string dir = api::kCudaCheckpointPrivateDir;
  std::vector<CdiMount> shipped = {
      {.host_path = "/h/helper", .container_path = "/usr/local/bin/cc", .type = "bind", .options = {"ro"}},
      {.host_path = "/h", .container_path = dir, .type = "bind", .options = {"ro"}}};
  auto placed = PlaceHelperMounts(shipped, "d=helper", dir, "/opt/x/cuda-checkpoint");
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  ASSERT_EQ(placed->size(), 2u);
  EXPECT_EQ((*placed)[0].container_path, "/opt/x/cuda-checkpoint");
  EXPECT_EQ((*placed)[1].container_path, dir);
  // A spec without the directory still loads (the preflight says what is missing).
  auto old = PlaceHelperMounts({shipped[0]}, "d=helper", dir, "/p");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ((*old)[0].container_path, "/p");
  // The helper inside its own directory would hide it, or be hidden.
  for (const std::string& inside : {dir, dir + "/cuda-checkpoint"}) {
    EXPECT_THAT(PlaceHelperMounts(shipped, "d=helper", dir, inside).status().message(),
                HasSubstr("inside the helper's private directory"));
  }
  // Two helpers, two directories, or none at all: which one runsc would run is unclear.
  for (const auto& bad : std::vector<std::vector<CdiMount>>{
           {shipped[0], shipped[0]}, {shipped[0], shipped[1], shipped[1]}, {shipped[1]}, {}}) {
    auto r = PlaceHelperMounts(bad, "d=helper", dir, "/p");
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad.size();
    EXPECT_THAT(r.status().message(), HasSubstr("d=helper"));
  }
}

TEST(CdiSpec, ErrorsNameTheFileAndField) {
  struct Case {
    std::string text, want;
  } cases[] = {
      {"kind: a.b/c\ndevices: [{name: x}]\n", "cdiVersion is missing"},
      {"cdiVersion: 0.6.0\nkind: nokindslash\ndevices: [{name: x}]\n", "kind \"nokindslash\""},
      {"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: []\n", "devices must be a non-empty list"},
      {"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{name: x}, {name: x}]\n", "device x is defined twice"},
      {"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {env: [NOEQUALS]}}]\n",
       "is not NAME=value"},
      {"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {mounts: [{hostPath: /a, containerPath: rel}]}}]\n",
       "containerPath must be absolute"},
      {"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, type: p}]}}]\n",
       "type must be c or b"},
      {"{not yaml: [", "not YAML/JSON"},
  };
  for (const auto& c : cases) {
    auto spec = ParseCdiSpec(c.text, "/etc/cdi/broken.yaml");
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr("/etc/cdi/broken.yaml")) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.want)) << c.text;
  }
}

TEST(CdiRegistry, LaterDirectoryWinsAndDuplicatesInOneDirectoryAreErrors) {
  TempDir tmp;
  const fs::path etc = tmp.path() / "etc-cdi", run = tmp.path() / "run-cdi";
  WriteFile(etc / "gpu.yaml", kGpuSpec);
  WriteFile(run / "gpu.json",
            R"({"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"GPU-cccc","containerEdits":{"env":["FROM=run"]}}]})");
  WriteFile(etc / "ignored.txt", "not a spec");
  auto reg = CdiRegistry::Load({etc.string(), run.string(), (tmp.path() / "missing").string()});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  auto from_run = reg->Resolve({"nvidia.com/gpu=GPU-cccc"});
  ASSERT_TRUE(from_run.ok()) << from_run.status().ToString();
  EXPECT_EQ(from_run->env, std::vector<std::string>{"FROM=run"});
  auto shadowed = reg->Resolve({"nvidia.com/gpu=GPU-aaaa"});
  EXPECT_EQ(shadowed.status().code(), Code::kNotFound);

  WriteFile(etc / "gpu-again.yaml", kGpuSpec);
  auto dup = CdiRegistry::Load({etc.string()});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("is defined by both"));
}

TEST(CdiRegistry, ResolveAppliesCommonEditsOncePerKind) {
  auto gpu = ParseCdiSpec(kGpuSpec, "gpu.yaml");
  auto helper = ParseCdiSpec(HelperSpecText(), "helper.yaml");
  ASSERT_TRUE(gpu.ok() && helper.ok());
  auto reg = CdiRegistry::FromSpecs({*gpu, *helper});
  auto edits = reg.Resolve({"nvidia.com/gpu=GPU-aaaa", "nvidia.com/gpu=GPU-bbbb",
                            "stasis.dev/cuda-checkpoint=helper"});
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  EXPECT_EQ(edits->env, std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void"});
  EXPECT_EQ(edits->device_nodes.size(), 3u);  // /dev/null once, nvidia0, nvidia1
  EXPECT_EQ(edits->mounts.size(), 3u);        // libcuda once, the helper, its private directory
  EXPECT_EQ(edits->hooks, 1);

  EXPECT_EQ(reg.Resolve({"nvidia.com/gpu=GPU-zzzz"}).status().code(), Code::kNotFound);
  EXPECT_THAT(reg.Resolve({"amd.com/gpu=0"}).status().message(), HasSubstr("no CDI spec defines kind amd.com/gpu"));
  for (const char* bad : {"nvidia.com/gpu", "gpu=0", "/gpu=0", "nvidia.com/gpu="}) {
    EXPECT_EQ(reg.Resolve({bad}).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(ApplyCdiEdits, EditsLandInTheOciSpecWithHostDeviceNumbers) {
  auto gpu = ParseCdiSpec(kGpuSpec, "gpu.yaml");
  ASSERT_TRUE(gpu.ok());
  auto edits = CdiRegistry::FromSpecs({*gpu}).Resolve({"nvidia.com/gpu=GPU-aaaa", "nvidia.com/gpu=GPU-bbbb"});
  ASSERT_TRUE(edits.ok());
  json oci = {{"process", {{"env", {"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"}}}},
              {"mounts", {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}}}},
              {"linux", {{"devices", {{{"path", "/dev/nvidia0"}, {"type", "c"}, {"major", 1}, {"minor", 1}}}}}}};
  ASSERT_TRUE(ApplyCdiEdits(oci, *edits).ok());
  EXPECT_EQ(oci["process"]["env"], json({"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void"}));
  const json& devices = oci["linux"]["devices"];
  ASSERT_EQ(devices.size(), 3u) << devices.dump();
  // /dev/nvidia0 replaced by the spec's, numbers from the host's /dev/zero (1:5).
  EXPECT_EQ(devices[0]["path"], "/dev/nvidia0");
  EXPECT_EQ(devices[0]["major"], 1);
  EXPECT_EQ(devices[0]["minor"], 5);
  EXPECT_EQ(devices[0]["type"], "c");
  EXPECT_EQ(devices[1]["path"], "/dev/null");
  EXPECT_EQ(devices[1]["minor"], 3);
  EXPECT_EQ(devices[2]["major"], 195);
  EXPECT_EQ(devices[2]["fileMode"], 438);
  EXPECT_EQ(oci["linux"]["resources"]["devices"].size(), 3u);
  EXPECT_EQ(oci["linux"]["resources"]["devices"][2]["access"], "rwm");
  ASSERT_EQ(oci["mounts"].size(), 2u);
  EXPECT_EQ(oci["mounts"][1]["type"], "bind");
  EXPECT_EQ(oci["mounts"][1]["destination"], "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04");

  CdiEdits missing;
  missing.device_nodes.push_back({.path = "/dev/nvidia7"});
  EXPECT_EQ(ApplyCdiEdits(oci, missing).code(), Code::kNotFound);
  CdiEdits not_device;
  not_device.device_nodes.push_back({.path = "/dev/x", .host_path = "/etc/hostname"});
  EXPECT_EQ(ApplyCdiEdits(oci, not_device).code(), Code::kInvalidArgument);
}

class GpuBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = tmp_.path() / "bundle";
    fs::create_directories(source_ / "rootfs");
    original_ = json{{"ociVersion", "1.0.2"},
                     {"process", {{"args", {"/bin/sh"}}, {"env", {"PATH=/bin"}}}},
                     {"root", {{"path", "rootfs"}}},
                     {"mounts", json::array()}};
    WriteFile(source_ / "config.json", original_.dump());
    WriteFile(tmp_.path() / "cdi" / "gpu.yaml", kGpuSpec);
    WriteFile(tmp_.path() / "cdi" / "helper.yaml", HelperSpecText());
    auto reg = CdiRegistry::Load({(tmp_.path() / "cdi").string()});
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    registry_ = *reg;
    request_.source_bundle = source_.string();
    request_.out_dir = (tmp_.path() / "out" / "ns_a").string();
    request_.gpu_uuids = {"GPU-bbbb"};
    request_.cuda_checkpoint_path = "/opt/cuda/cuda-checkpoint";
    request_.helper_private_dir = api::kCudaCheckpointPrivateDir;
  }

  TempDir tmp_;
  fs::path source_;
  json original_;
  CdiRegistry registry_;
  GpuBundleRequest request_;
};

TEST_F(GpuBundleTest, WritesTheDerivedBundleAndLeavesTheSourceAlone) {
  auto out = WriteGpuBundle(registry_, request_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, request_.out_dir);
  const json written = ReadJson(fs::path(*out) / "config.json");
  EXPECT_EQ(written["root"]["path"], (source_ / "rootfs").string());  // absolute: rootfs stays put
  bool helper = false, private_dir = false;
  for (const auto& m : written["mounts"]) {
    if (m["destination"] == "/opt/cuda/cuda-checkpoint") {
      helper = true;
      EXPECT_EQ(m["source"], "/usr/lib/stasis/cuda-checkpoint/stasis-cuda-checkpoint");
      EXPECT_THAT(m["options"].get<std::vector<std::string>>(), ::testing::Contains("ro"));
    }
    if (m["destination"] == api::kCudaCheckpointPrivateDir) {
      private_dir = true;
      EXPECT_EQ(m["source"], "/usr/lib/stasis/cuda-checkpoint");
    }
    EXPECT_NE(m["destination"], "/usr/local/bin/cuda-checkpoint") << "the spec's default path must be moved";
  }
  EXPECT_TRUE(helper) << written["mounts"].dump();
  EXPECT_TRUE(private_dir) << written["mounts"].dump();
  std::vector<std::string> paths;
  for (const auto& d : written["linux"]["devices"]) paths.push_back(d["path"]);
  EXPECT_THAT(paths, ::testing::UnorderedElementsAre("/dev/null", "/dev/nvidia1"));
  EXPECT_EQ(ReadJson(source_ / "config.json"), original_);
  EXPECT_FALSE(fs::exists(fs::path(*out) / "config.json.tmp"));
}

// The process.env of the bundle WriteGpuBundle wrote.
std::vector<std::string> WrittenEnv(const std::string& out_dir) {
  return ReadJson(fs::path(out_dir) / "config.json")["process"]["env"].get<std::vector<std::string>>();
}

// An actor that does not opt into the fast path runs exactly the environment it had.
TEST_F(GpuBundleTest, NoPreloadUnlessAsked) {
  auto out = WriteGpuBundle(registry_, request_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (const std::string& e : WrittenEnv(*out)) EXPECT_FALSE(e.starts_with("LD_PRELOAD=")) << e;
  EXPECT_THAT(WrittenEnv(*out), ::testing::Contains("PATH=/bin"));
}

TEST_F(GpuBundleTest, PreloadsTheFastSnapshotLibraryWhenAsked) {
  request_.preload_library = api::kFastSnapshotLibrary;
  auto out = WriteGpuBundle(registry_, request_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<std::string> env = WrittenEnv(*out);
  EXPECT_THAT(env, ::testing::Contains(std::string("LD_PRELOAD=") + api::kFastSnapshotLibrary));
  EXPECT_THAT(env, ::testing::Contains("PATH=/bin"));
  EXPECT_EQ(ReadJson(source_ / "config.json"), original_);  // the user's bundle is untouched
}

// A preload the bundle or image sets is kept, after the library, in every LD_PRELOAD entry.
TEST_F(GpuBundleTest, PreloadGoesBeforeTheConfigsOwn) {
  json config = original_;
  config["process"]["env"] = {"PATH=/bin", "LD_PRELOAD=/usr/lib/libjemalloc.so:/opt/x.so"};
  WriteFile(source_ / "config.json", config.dump());
  request_.preload_library = api::kFastSnapshotLibrary;
  auto out = WriteGpuBundle(registry_, request_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string want = std::string("LD_PRELOAD=") + api::kFastSnapshotLibrary +
                           " /usr/lib/libjemalloc.so:/opt/x.so";
  // Edited in place (the CDI spec's variable comes after it), never added a second time.
  EXPECT_THAT(WrittenEnv(*out),
              ::testing::ElementsAre("PATH=/bin", want, "NVIDIA_VISIBLE_DEVICES=void"));
}

TEST(PrependPreload, KeepsWhatIsThereAndNeverDoublesTheLibrary) {
  const std::string lib = api::kFastSnapshotLibrary;
  json oci = {{"process", {{"env", {"A=1", "LD_PRELOAD=", "LD_PRELOAD=/a.so /b.so"}}}}};
  PrependPreload(oci, lib);
  EXPECT_EQ(oci["process"]["env"],
            json({"A=1", "LD_PRELOAD=" + lib, "LD_PRELOAD=" + lib + " /a.so /b.so"}));
  const json once = oci;
  PrependPreload(oci, lib);  // already first: unchanged
  EXPECT_EQ(oci, once);
  json listed = {{"process", {{"env", {"LD_PRELOAD=/a.so:" + lib}}}}};
  PrependPreload(listed, lib);
  EXPECT_EQ(listed["process"]["env"], json({"LD_PRELOAD=/a.so:" + lib}));
  json bare = {{"process", json::object()}};
  PrependPreload(bare, lib);
  EXPECT_EQ(bare["process"]["env"], json({"LD_PRELOAD=" + lib}));
  // A longer name that merely starts with the library's is another library.
  json similar = {{"process", {{"env", {"LD_PRELOAD=" + lib + ".1"}}}}};
  PrependPreload(similar, lib);
  EXPECT_EQ(similar["process"]["env"], json({"LD_PRELOAD=" + lib + " " + lib + ".1"}));
}

TEST(FastSnapshotLibrary, LivesInTheHelpersPrivateDirectory) {
  // The CDI spec mounts only that directory: a library elsewhere would not be in the container.
  EXPECT_EQ(fs::path(api::kFastSnapshotLibrary).parent_path(),
            fs::path(api::kCudaCheckpointPrivateDir));
  EXPECT_EQ(fs::path(api::kFastSnapshotLibrary).filename(), "libstasis-fastsnap.so");
}

TEST_F(GpuBundleTest, MissingPiecesAreNamed) {
  GpuBundleRequest r = request_;
  r.gpu_uuids = {"GPU-nope"};
  auto out = WriteGpuBundle(registry_, r);
  EXPECT_EQ(out.status().code(), Code::kNotFound);
  EXPECT_THAT(out.status().message(), HasSubstr("nvidia.com/gpu=GPU-nope"));

  r = request_;
  r.gpu_uuids.clear();
  EXPECT_EQ(WriteGpuBundle(registry_, r).status().reason(), "no_gpu_on_worker");

  r = request_;
  r.helper_device = "stasis.dev/cuda-checkpoint=other";
  EXPECT_THAT(WriteGpuBundle(registry_, r).status().message(), HasSubstr("defines no device"));

  r = request_;
  r.source_bundle = (tmp_.path() / "nothing").string();
  EXPECT_EQ(WriteGpuBundle(registry_, r).status().reason(), "bad_bundle");
  EXPECT_FALSE(fs::exists(request_.out_dir));
}

// `nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader` as the H100 machine
// printed it (driver 580.159.04), and two GPUs of another model.
TEST(GpuDiscovery, ParsesNvidiaSmiQuery) {
  auto one = ParseNvidiaSmiQuery("GPU-ed36abe3-d562-6bb5-0611-fc716964df23, NVIDIA H100 80GB HBM3, 580.159.04\n");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->gpus.size(), 1u);
  EXPECT_EQ(one->gpus[0].uuid, "GPU-ed36abe3-d562-6bb5-0611-fc716964df23");
  EXPECT_EQ(one->gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(one->driver_version, "580.159.04");
  EXPECT_EQ(one->cuda_version, "");
  EXPECT_EQ(one->source, "nvidia-smi");
  auto two = ParseNvidiaSmiQuery("GPU-1111, NVIDIA A100-SXM4-40GB, 550.54.15\r\nGPU-3333, NVIDIA A100-SXM4-40GB, 550.54.15\n");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->gpus.size(), 2u);
  EXPECT_EQ(two->gpus[1].uuid, "GPU-3333");
  EXPECT_EQ(two->driver_version, "550.54.15");
  EXPECT_EQ(ParseNvidiaSmiQuery("No devices were found\n").status().code(), Code::kUnavailable);
  EXPECT_EQ(ParseNvidiaSmiQuery("GPU-1, A, 550.1\nGPU-2, A, 580.1\n").status().code(), Code::kUnavailable);
}

TEST(GpuDiscovery, CudaDriverVersionsAreMajorDotMinor) {
  EXPECT_EQ(FormatCudaDriverVersion(13000), "13.0");
  EXPECT_EQ(FormatCudaDriverVersion(12040), "12.4");
  EXPECT_EQ(FormatCudaDriverVersion(12090), "12.9");
  EXPECT_EQ(FormatCudaDriverVersion(0), "");
}

// `nvidia-smi --query-gpu=uuid,memory.used --format=csv,noheader,nounits`: MiB per GPU.
TEST(GpuDiscovery, SumsTheMemoryInUseOnTheActorsGpus) {
  const std::string out = "GPU-1111, 1024\nGPU-3333, 81559\n";
  EXPECT_EQ(SumGpuMemoryUsed(out, {"GPU-3333"}).value(), int64_t{81559} << 20);
  EXPECT_EQ(SumGpuMemoryUsed(out, {"GPU-1111", "GPU-3333"}).value(), int64_t{82583} << 20);
  EXPECT_EQ(SumGpuMemoryUsed(out, {}).value(), 0);
  EXPECT_EQ(SumGpuMemoryUsed(out, {"GPU-9999"}).status().code(), Code::kUnavailable);
  EXPECT_EQ(SumGpuMemoryUsed("GPU-1111, [N/A]\n", {"GPU-1111"}).status().code(), Code::kUnavailable);
  EXPECT_EQ(GpuMemoryUsed({}, "/nonexistent/nvidia-smi").value(), 0) << "no GPU: nothing is run";
  EXPECT_EQ(GpuMemoryUsed({"GPU-1111"}, "/nonexistent/nvidia-smi").status().code(), Code::kNotFound);
}

TEST(GpuDiscovery, ConsecutiveGpusFormMultiGpuWorkers) {
  using Workers = std::vector<std::vector<std::string>>;
  EXPECT_EQ(GroupGpus({"GPU-a", "GPU-b", "GPU-c", "GPU-d"}, 2).value(), (Workers{{"GPU-a", "GPU-b"}, {"GPU-c", "GPU-d"}}));
  EXPECT_EQ(GroupGpus({"GPU-a", "GPU-b"}, 1).value(), (Workers{{"GPU-a"}, {"GPU-b"}}));
  auto odd = GroupGpus({"GPU-a", "GPU-b", "GPU-c"}, 2);
  EXPECT_EQ(odd.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(odd.status().message(), HasSubstr("3 GPU(s) do not make workers of 2"));
  EXPECT_EQ(GroupGpus({}, 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(GroupGpus({"GPU-a"}, 0).status().code(), Code::kInvalidArgument);
}

TEST(GpuDiscovery, NoSourceIsNotFound) {
  GpuDiscoverySources none;
  none.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  none.proc_dir = "/nonexistent/proc";
  none.nvidia_smi = "/nonexistent/nvidia-smi";
  auto r = DiscoverGpus(none);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(r.status().message(), HasSubstr("no GPU under /nonexistent/proc/gpus"));
  EXPECT_THAT(r.status().message(), HasSubstr("nvidia-smi"));
}

// /proc/driver/nvidia/gpus/<bus>/information and /proc/driver/nvidia/version as the H100
// machine's open kernel module wrote them (tabs included), and a proprietary module's version.
TEST(GpuDiscovery, ReadsTheKernelModulesProcFiles) {
  auto gpu = ParseProcGpuInformation(
      "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 41\nGPU UUID: \t GPU-ed36abe3-d562-6bb5-0611-fc716964df23\n"
      "Video BIOS: \t 96.00.da.00.0c\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
      "Bus Location: \t 0000:00:06.0\n");
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu->uuid, "GPU-ed36abe3-d562-6bb5-0611-fc716964df23");
  EXPECT_FALSE(ParseProcGpuInformation("Model: \t NVIDIA H200\n").has_value()) << "no UUID";
  EXPECT_EQ(ParseProcDriverVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Release Build  "
                                   "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 30 00:00:00 UTC 2025\nGCC version:  gcc 12\n"),
            "580.95.05");
  EXPECT_EQ(ParseProcDriverVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release "
                                   "Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n"),
            "580.159.04");
  EXPECT_EQ(ParseProcDriverVersion("GCC version:  gcc version 12.2.0\n"), "");

  TempDir proc("stasis-proc-");
  const std::vector<std::pair<std::string, std::string>> gpus = {{"0000:00:07.0", "GPU-2222"},
                                                                  {"0000:00:06.0", "GPU-1111"}};
  for (const auto& [bus, uuid] : gpus) {
    fs::create_directories(proc.path() / "gpus" / bus);
    std::ofstream(proc.path() / "gpus" / bus / "information") << "Model: \t\t NVIDIA H200\nGPU UUID: \t " << uuid << "\n";
  }
  EXPECT_EQ(DiscoverGpusFromProc(proc.path().string()).status().code(), Code::kUnavailable) << "no version file";
  std::ofstream(proc.path() / "version") << "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Release Build\n";
  GpuDiscoverySources sources;
  sources.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  sources.proc_dir = proc.path().string();
  auto inv = DiscoverGpus(sources);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->source, "procfs");
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-1111") << "in bus order";
  EXPECT_EQ(inv->driver_version, "580.95.05");
  EXPECT_EQ(inv->cuda_version, "");
}

}  // namespace
}  // namespace stasis
