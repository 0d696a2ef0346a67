#include "runtimes/bundle_confinement.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

namespace stasis {
namespace {

using json = nlohmann::json;

Status NotAllowed(const std::string& message) {
  return Status(Code::kPermissionDenied, message, kBundleNotAllowed);
}

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '/')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

// Whether `path` is `base` or lies under it (both lexically clean and absolute).
bool Within(const std::string& path, const std::string& base) {
  if (base == "/") return true;
  return path == base || (path.size() > base.size() && path.compare(0, base.size(), base) == 0 &&
                          path[base.size()] == '/');
}

bool StrictlyWithin(const std::string& path, const std::string& base) {
  return path != base && Within(path, base);
}

std::string Clean(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// A path named by the bundle (root.path, a bind source): relative to the bundle when relative;
// lexically clean, strictly under `root`, no symlinked component.
std::string ContainedPathProblem(const std::string& what, const std::string& raw, const std::string& bundle,
                                 const std::string& root) {
  if (raw.empty()) return what + " is empty";
  const std::string path = Clean(raw.front() == '/' ? raw : bundle + "/" + raw);
  if (std::string why = LexicalPathProblem(path); !why.empty()) return what + " \"" + raw + "\" " + why;
  if (!StrictlyWithin(path, root)) {
    return what + " " + path + " is not under the bundle's root " + root;
  }
  if (std::string why = SymlinkProblem(path, true); !why.empty()) return what + " " + path + ": " + why;
  return "";
}

bool HasOption(const json& mount, const char* option) {
  for (const auto& o : mount.value("options", json::array())) {
    if (o.is_string() && o == option) return true;
  }
  return false;
}

// A read-only bind from one of the operator's --bundle-readonly-source directories.
bool AllowedReadOnly(const json& mount, const std::string& source, const BundleRoots& roots) {
  if (!HasOption(mount, "ro") || source.empty() || !LexicalPathProblem(source).empty()) return false;
  for (const auto& r : roots.readonly_sources) {
    if (Within(Clean(source), Clean(r))) return SymlinkProblem(Clean(source), true).empty();
  }
  return false;
}

bool IsBind(const json& mount) {
  if (mount.value("type", "") == "bind") return true;
  for (const auto& o : mount.value("options", json::array())) {
    if (o.is_string() && (o == "bind" || o == "rbind")) return true;
  }
  return false;
}

// What runsc would do as root with the host that the bundle's owner must not choose.
std::string HostControlProblem(const json& spec) {
  if (spec.contains("hooks") && !spec["hooks"].is_null() && !spec["hooks"].empty()) {
    return "config.json has hooks, which runsc would run on the host as root";
  }
  const json linux = spec.value("linux", json::object());
  if (!linux.is_object()) return "";
  for (const auto& ns : linux.value("namespaces", json::array())) {
    if (ns.is_object() && ns.contains("path")) {
      return "config.json joins the host namespace " + ns["path"].dump() + " by path";
    }
  }
  if (linux.contains("devices") && !linux["devices"].is_null() && !linux["devices"].empty()) {
    return "config.json lists linux.devices (a GPU actor's devices come from the node's CDI specs)";
  }
  return "";
}

// Reads <bundle>/config.json through O_NOFOLLOW: a symlink there is refused, not followed.
Result<json> ReadConfig(const std::string& bundle) {
  Fd f{open((bundle + "/config.json").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (f.fd < 0) {
    // A missing or unreadable file is a broken bundle (runsc_driver.h CheckBundle's reason); a
    // symlink is a refused one.
    if (errno == ELOOP) return NotAllowed("bundle " + bundle + ": config.json is a symlink");
    return Status(Code::kInvalidArgument, "bad bundle " + bundle + ": cannot read config.json: " + std::strerror(errno),
                  "bad_bundle");
  }
  struct stat st {};
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotAllowed("bundle " + bundle + ": config.json is not a regular file");
  }
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = read(f.fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  json spec = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return Status(Code::kInvalidArgument, "bad bundle " + bundle + ": config.json is not a JSON object",
                  "bad_bundle");
  }
  return spec;
}

// Which root `bundle` lies strictly under, per-namespace sub-root included; "" when none.
std::string EffectiveRoot(const std::string& bundle, const std::string& ns, const BundleRoots& roots) {
  for (const auto& r : roots.roots) {
    const std::string eff = roots.per_namespace ? Clean(r) + "/" + ns : Clean(r);
    if (StrictlyWithin(bundle, eff)) return eff;
  }
  return "";
}

std::string RootsText(const BundleRoots& roots, const std::string& ns) {
  std::string out;
  for (const auto& r : roots.roots) {
    out += (out.empty() ? "" : ", ") + Clean(r) + (roots.per_namespace ? "/" + ns : "");
  }
  return out;
}

}  // namespace

std::string LexicalPathProblem(const std::string& path) {
  if (path.empty() || path.front() != '/') return "is not an absolute path";
  for (const auto& c : Components(path)) {
    if (c == "..") return "has a \"..\" component";
    if (c == ".") return "has a \".\" component";
  }
  if (path.find("//") != std::string::npos) return "has an empty component";
  return "";
}

std::string SymlinkProblem(const std::string& path, bool missing_ok) {
  Fd dir{open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) return std::string("cannot open /: ") + std::strerror(errno);
  std::string walked;
  for (const auto& c : Components(path)) {
    walked += "/" + c;
    // O_PATH|O_NOFOLLOW opens a symlink itself, so fstat tells one apart without racing a
    // second lookup of the same name.
    Fd next{openat(dir.fd, c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)};
    if (next.fd < 0 && errno == ENOENT && missing_ok) return "";
    if (next.fd < 0) return walked + ": " + std::strerror(errno);
    struct stat st {};
    if (fstat(next.fd, &st) != 0) return walked + ": " + std::strerror(errno);
    if (S_ISLNK(st.st_mode)) return walked + " is a symlink";
    std::swap(dir.fd, next.fd);
  }
  return "";
}

Status ValidateBundleRoots(const BundleRoots& roots, const AgentDirs& own) {
  for (const auto& raw : roots.readonly_sources) {
    const std::string r = Clean(raw);
    auto bad = [&](const std::string& why) {
      return Status(Code::kInvalidArgument, "--bundle-readonly-source " + raw + ": " + why);
    };
    if (std::string why = LexicalPathProblem(r); !why.empty()) return bad(why);
    if (r == "/") return bad("the whole file system cannot be bound into sandboxes");
    if (std::string why = SymlinkProblem(r, false); !why.empty()) return bad(why);
    for (const auto& d : own.private_dirs) {
      if (!d.empty() && (Within(Clean(d), r) || Within(r, Clean(d)))) return bad("overlaps the agent's own directory " + d);
    }
    if (!own.state_root.empty() && (Within(Clean(own.state_root), r) || Within(r, Clean(own.state_root)))) {
      return bad("overlaps the agent's --root " + own.state_root);
    }
  }
  for (const auto& raw : roots.roots) {
    const std::string r = Clean(raw);
    auto bad = [&](const std::string& why) {
      return Status(Code::kInvalidArgument, "--bundle-root " + raw + ": " + why);
    };
    if (std::string why = LexicalPathProblem(r); !why.empty()) return bad(why);
    if (r == "/") return bad("the whole file system cannot be a bundle root");
    if (std::string why = SymlinkProblem(r, false); !why.empty()) return bad(why);
    struct stat st {};
    if (stat(r.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return bad("is not a directory");
    if (!own.state_root.empty() && Within(Clean(own.state_root), r)) {
      return bad("holds the agent's --root " + own.state_root);
    }
    for (const auto& d : own.private_dirs) {
      if (d.empty()) continue;
      if (Within(Clean(d), r)) return bad("holds the agent's own directory " + d);
      if (Within(r, Clean(d))) return bad("lies inside the agent's own directory " + d);
    }
  }
  return OkStatus();
}

Result<std::string> ConfineBundleDir(const std::string& raw, const std::string& ns, const BundleRoots& roots) {
  if (roots.roots.empty()) {
    return NotAllowed("this node allows no bundles: start the agent with --bundle-root DIR");
  }
  const std::string bundle = Clean(raw);
  if (std::string why = LexicalPathProblem(bundle); !why.empty()) return NotAllowed("bundle " + raw + " " + why);
  const std::string root = EffectiveRoot(bundle, ns, roots);
  if (root.empty()) {
    return NotAllowed("bundle " + bundle + " is not under an allowed bundle root of this node (" +
                      RootsText(roots, ns) + ")");
  }
  if (std::string why = SymlinkProblem(bundle, true); !why.empty()) return NotAllowed("bundle " + bundle + ": " + why);
  return root;
}

Result<std::string> ConfineBundle(const std::string& raw, const std::string& ns, const BundleRoots& roots) {
  auto confined = ConfineBundleDir(raw, ns, roots);
  if (!confined.ok()) return confined.status();
  const std::string& root = *confined;
  const std::string bundle = Clean(raw);
  auto spec = ReadConfig(bundle);
  if (!spec.ok()) return spec.status();
  if (std::string why = HostControlProblem(*spec); !why.empty()) return NotAllowed("bundle " + bundle + ": " + why);
  const json root_obj = spec->value("root", json::object());
  if (root_obj.is_object() && root_obj.contains("path") && root_obj["path"].is_string()) {
    if (std::string why = ContainedPathProblem("root.path", root_obj["path"].get<std::string>(), bundle, root);
        !why.empty()) {
      return NotAllowed("bundle " + bundle + ": " + why);
    }
  }
  const json mounts = spec->value("mounts", json::array());
  for (const auto& m : mounts.is_array() ? mounts : json::array()) {
    if (!m.is_object() || !IsBind(m)) continue;
    const std::string source = m.contains("source") && m["source"].is_string() ? m["source"].get<std::string>() : "";
    const std::string what = "the source of the bind mount at " + m.value("destination", std::string("?"));
    if (AllowedReadOnly(m, source, roots)) continue;
    if (std::string why = ContainedPathProblem(what, source, bundle, root); !why.empty()) {
      return NotAllowed("bundle " + bundle + ": " + why);
    }
  }
  return root;
}

}  // namespace stasis
