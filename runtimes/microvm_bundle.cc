#include "runtimes/microvm_bundle.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace stasis {
namespace {

namespace fs = std::filesystem;

// A relative path whose canonical form stays under `dir` and is a regular file.
Result<std::string> ConfinedFile(const fs::path& dir, const nlohmann::json& spec,
                                 const std::string& field, const std::string& bundle) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "bad bundle " + bundle + ": " + field + ": " + why,
                  "bad_bundle");
  };
  if (!spec[field].is_string()) return bad("must be a string");
  const fs::path rel = spec[field].get<std::string>();
  if (rel.empty()) return bad("must not be empty");
  if (rel.is_absolute()) return bad("must be a path relative to the bundle directory");
  for (const auto& part : rel) {
    if (part == "..") return bad("must not contain a '..' segment");
  }
  std::error_code ec;
  const fs::path full = fs::canonical(dir / rel, ec);
  if (ec) return bad(ec.message());
  // canonical resolved every symlink: a link pointing out of the bundle ends up outside it.
  const auto [d, f] = std::mismatch(dir.begin(), dir.end(), full.begin(), full.end());
  if (d != dir.end()) return bad("resolves outside the bundle directory");
  if (!fs::is_regular_file(full, ec)) return bad("not a regular file");
  return full.string();
}

}  // namespace

Result<MicrovmBundle> LoadMicrovmBundle(const std::string& bundle) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "bad bundle " + bundle + ": " + why, "bad_bundle");
  };
  if (bundle.empty()) return bad("no bundle directory given");
  std::error_code ec;
  const fs::path dir = fs::canonical(bundle, ec);
  if (ec || !fs::is_directory(dir, ec)) return bad("not a directory");
  std::ifstream in(dir / "microvm.json");
  if (!in) return bad("cannot read microvm.json");
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return bad(std::string("microvm.json: ") + e.what());
  }
  if (!spec.is_object()) return bad("microvm.json is not an object");
  static const std::set<std::string> kKnown = {"kernel", "initramfs", "memoryMiB", "vcpus",
                                               "cmdline"};
  for (const auto& [key, value] : spec.items()) {
    if (!kKnown.count(key)) return bad("microvm.json: unknown field \"" + key + "\"");
  }

  MicrovmBundle b;
  b.dir = dir.string();
  if (!spec.contains("kernel")) return bad("microvm.json has no kernel");
  auto kernel = ConfinedFile(dir, spec, "kernel", bundle);
  if (!kernel.ok()) return kernel.status();
  b.kernel = *kernel;
  if (spec.contains("initramfs")) {
    auto initramfs = ConfinedFile(dir, spec, "initramfs", bundle);
    if (!initramfs.ok()) return initramfs.status();
    b.initramfs = *initramfs;
  }
  auto integer = [&](const char* field, int64_t min, int64_t max, int64_t* out) -> Status {
    if (!spec.contains(field)) return OkStatus();
    if (!spec[field].is_number_integer()) return bad(std::string(field) + ": must be an integer");
    const int64_t v = spec[field].get<int64_t>();
    if (v < min || v > max) {
      return bad(std::string(field) + ": must be between " + std::to_string(min) + " and " +
                 std::to_string(max));
    }
    *out = v;
    return OkStatus();
  };
  if (Status s = integer("memoryMiB", kMicrovmMinMemoryMiB, kMicrovmMaxMemoryMiB, &b.memory_mib);
      !s.ok())
    return s;
  if (Status s = integer("vcpus", 1, kMicrovmMaxVcpus, &b.vcpus); !s.ok()) return s;
  if (spec.contains("cmdline")) {
    if (!spec["cmdline"].is_string()) return bad("cmdline: must be a string");
    b.cmdline = spec["cmdline"].get<std::string>();
    if (b.cmdline.size() > kMicrovmMaxCmdline) {
      return bad("cmdline: longer than " + std::to_string(kMicrovmMaxCmdline) + " characters");
    }
    for (const unsigned char ch : b.cmdline) {
      if (ch < 0x20 || ch > 0x7e) return bad("cmdline: only printable ASCII characters");
    }
  }
  return b;
}

}  // namespace stasis
