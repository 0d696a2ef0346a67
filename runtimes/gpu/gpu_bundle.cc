#include "runtimes/gpu/gpu_bundle.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <spdlog/spdlog.h>

namespace stasis {
namespace {
namespace fs = std::filesystem;

constexpr std::string_view kPreloadPrefix = "LD_PRELOAD=";

// Whether the loader's list (separated by spaces or colons) names `library`.
bool PreloadListHas(std::string_view list, std::string_view library) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find_first_of(" :", start), list.size());
    if (list.substr(start, end - start) == library) return true;
    start = end + 1;
  }
  return false;
}
}  // namespace

void PrependPreload(nlohmann::json& oci, const std::string& library) {
  nlohmann::json& env = oci["process"]["env"];
  if (!env.is_array()) env = nlohmann::json::array();
  bool found = false;
  for (nlohmann::json& entry : env) {
    if (!entry.is_string()) continue;
    const std::string& text = entry.get_ref<const std::string&>();
    if (!text.starts_with(kPreloadPrefix)) continue;
    found = true;
    const std::string_view list = std::string_view(text).substr(kPreloadPrefix.size());
    if (PreloadListHas(list, library)) continue;
    // A space separates: the loader accepts both, and a path in the list may hold neither.
    entry = std::string(kPreloadPrefix) + library + (list.empty() ? "" : " ") + std::string(list);
  }
  if (!found) env.push_back(std::string(kPreloadPrefix) + library);
}

Result<std::vector<CdiMount>> PlaceHelperMounts(std::vector<CdiMount> mounts,
                                                const std::string& device,
                                                const std::string& private_dir,
                                                const std::string& cuda_checkpoint_path) {
  if (!private_dir.empty() && (cuda_checkpoint_path == private_dir ||
                               cuda_checkpoint_path.rfind(private_dir + "/", 0) == 0)) {
    return Status(Code::kInvalidArgument, "cudaCheckpointPath " + cuda_checkpoint_path +
                                              " is inside the helper's private directory " +
                                              private_dir);
  }
  int helpers = 0, dirs = 0;
  for (CdiMount& m : mounts) {
    if (!private_dir.empty() && m.container_path == private_dir) {
      ++dirs;
      continue;
    }
    ++helpers;
    m.container_path = cuda_checkpoint_path;
  }
  if (helpers != 1 || dirs > 1) {
    return Status(Code::kInvalidArgument,
                  "the CDI device " + device + " must mount the helper binary once and its private "
                  "directory at " + private_dir + " at most once; it has " +
                      std::to_string(helpers) + " other mount(s) and " + std::to_string(dirs) +
                      " at that directory");
  }
  return mounts;
}

Result<std::string> WriteGpuBundle(const CdiRegistry& cdi, const GpuBundleRequest& request) {
  auto bad_bundle = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "bad bundle " + request.source_bundle + ": " + why,
                  "bad_bundle");
  };
  if (request.gpu_uuids.empty()) {
    return Status(Code::kInvalidArgument, "a GPU actor needs a worker with a GPU; this worker has none",
                  "no_gpu_on_worker");
  }
  const fs::path source_config = fs::path(request.source_bundle) / "config.json";
  std::ifstream in(source_config);
  if (!in) return bad_bundle("cannot read config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json spec = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) return bad_bundle("config.json is not a JSON object");
  if (!spec.contains("root") || !spec["root"].contains("path") || !spec["root"]["path"].is_string()) {
    return bad_bundle("config.json has no root.path");
  }
  fs::path rootfs = spec["root"]["path"].get<std::string>();
  if (rootfs.is_relative()) rootfs = fs::absolute(fs::path(request.source_bundle) / rootfs);
  spec["root"]["path"] = rootfs.lexically_normal().string();

  std::vector<std::string> gpus;
  for (const auto& uuid : request.gpu_uuids) gpus.push_back(request.gpu_kind + "=" + uuid);
  auto edits = cdi.Resolve(gpus);
  if (!edits.ok()) return edits.status();
  auto helper = cdi.Resolve({request.helper_device});
  if (!helper.ok()) return helper.status();
  auto placed = PlaceHelperMounts(helper->mounts, request.helper_device,
                                 request.helper_private_dir, request.cuda_checkpoint_path);
  if (!placed.ok()) return placed.status();
  helper->mounts = std::move(*placed);
  edits->Append(*helper);
  if (edits->hooks > 0) {
    spdlog::warn("cdi hooks skipped bundle={} hooks={} why=\"runsc sandboxes have no host mount "
                 "namespace to run them in\"", request.out_dir, edits->hooks);
  }
  if (Status s = ApplyCdiEdits(spec, *edits); !s.ok()) return s;
  // After the CDI edits, so that a preload one of them sets is kept too.
  if (!request.preload_library.empty()) PrependPreload(spec, request.preload_library);

  std::error_code ec;
  fs::create_directories(request.out_dir, ec);
  if (ec) return Status(Code::kInternal, "creating " + request.out_dir + ": " + ec.message());
  const fs::path tmp = fs::path(request.out_dir) / "config.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << spec.dump(1) << '\n';
    if (!out.flush()) return Status(Code::kInternal, "writing " + tmp.string() + " failed");
  }
  fs::rename(tmp, fs::path(request.out_dir) / "config.json", ec);
  if (ec) return Status(Code::kInternal, "renaming " + tmp.string() + ": " + ec.message());
  return request.out_dir;
}

}  // namespace stasis
