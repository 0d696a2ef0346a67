#include "runtimes/sandbox_cgroup.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

std::string ReadTrimmed(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  std::string v = s.str();
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

Status MakeCgroup(const fs::path& dir) {
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return Status(Code::kFailedPrecondition, "cannot make cgroup " + dir.string() + ": " + ec.message());
  return OkStatus();
}

// cpuset's cgroups start with no CPUs and no memory nodes; a process cannot join one until
// both are set. The parent's are the sandboxes' (they are not limited here).
Status InheritCpuset(const fs::path& dir) {
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    if (!ReadTrimmed(dir / file).empty()) continue;
    const std::string parent = ReadTrimmed(dir.parent_path() / file);
    std::ofstream out(dir / file);
    out << parent << "\n";
    out.flush();
    if (!out) {
      return Status(Code::kFailedPrecondition,
                    "cannot set " + (dir / file).string() + " to \"" + parent + "\": " + std::strerror(errno));
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<std::string>> PrepareSandboxCgroups(const std::string& cgroup_root) {
  const fs::path root(cgroup_root);
  if (!root.is_absolute()) {
    return Status(Code::kInvalidArgument, "sandbox cgroup root must be an absolute path: " + cgroup_root);
  }
  std::vector<fs::path> hierarchies;
  std::error_code ec;
  if (fs::exists(root / "cgroup.controllers", ec)) {
    hierarchies.push_back(root);
  } else {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (!e.is_symlink() && e.is_directory() && fs::exists(e.path() / "cgroup.procs")) hierarchies.push_back(e.path());
    }
    std::sort(hierarchies.begin(), hierarchies.end());
  }
  if (hierarchies.empty()) {
    return Status(Code::kFailedPrecondition, "no cgroup hierarchy under " + cgroup_root +
                                                 (ec ? " (" + ec.message() + ")" : "") +
                                                 ": mount the host's /sys/fs/cgroup there");
  }
  std::vector<std::string> procs;
  for (const auto& h : hierarchies) {
    const fs::path dir = h / kSandboxCgroupName;
    if (Status s = MakeCgroup(dir); !s.ok()) return s;
    if (fs::exists(dir / "cpuset.cpus")) {
      if (Status s = InheritCpuset(dir); !s.ok()) return s;
    }
    procs.push_back((dir / "cgroup.procs").string());
  }
  return procs;
}

}  // namespace stasis
