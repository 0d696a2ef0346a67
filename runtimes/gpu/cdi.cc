#include "runtimes/gpu/cdi.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

namespace stasis {
namespace {

namespace fs = std::filesystem;

Status Bad(const std::string& file, const std::string& what) {
  return Status(Code::kInvalidArgument, "CDI spec " + file + ": " + what);
}

// yaml-cpp throws on a scalar of the wrong type; these turn that into a value.
template <typename T>
Result<T> Scalar(const YAML::Node& n, const std::string& file, const std::string& field) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(file, field + " has the wrong type");
  }
}

Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& file,
                                            const std::string& field) {
  std::vector<std::string> out;
  if (!n) return out;
  if (!n.IsSequence()) return Bad(file, field + " must be a list");
  for (const auto& item : n) {
    auto s = Scalar<std::string>(item, file, field + "[]");
    if (!s.ok()) return s.status();
    out.push_back(*s);
  }
  return out;
}

Result<CdiEdits> ParseEdits(const YAML::Node& n, const std::string& file, const std::string& where) {
  CdiEdits e;
  if (!n) return e;
  if (!n.IsMap()) return Bad(file, where + " must be a mapping");
  auto env = StringList(n["env"], file, where + ".env");
  if (!env.ok()) return env.status();
  for (const auto& v : *env) {
    if (v.find('=') == std::string::npos || v.front() == '=') {
      return Bad(file, where + ".env entry \"" + v + "\" is not NAME=value");
    }
  }
  e.env = *env;
  if (const YAML::Node nodes = n["deviceNodes"]) {
    if (!nodes.IsSequence()) return Bad(file, where + ".deviceNodes must be a list");
    for (const auto& d : nodes) {
      CdiDeviceNode node;
      auto path = Scalar<std::string>(d["path"], file, where + ".deviceNodes[].path");
      if (!path.ok()) return path.status();
      node.path = *path;
      if (node.path.empty() || node.path.front() != '/') {
        return Bad(file, where + ".deviceNodes[].path must be absolute");
      }
      if (d["hostPath"]) node.host_path = d["hostPath"].as<std::string>("");
      if (d["type"]) node.type = d["type"].as<std::string>("");
      if (d["permissions"]) node.permissions = d["permissions"].as<std::string>("");
      for (auto [key, slot] : {std::pair{"major", &node.major}, std::pair{"minor", &node.minor}}) {
        if (!d[key]) continue;
        auto v = Scalar<int64_t>(d[key], file, where + ".deviceNodes[]." + key);
        if (!v.ok()) return v.status();
        *slot = *v;
      }
      for (auto [key, slot] : {std::pair{"fileMode", &node.file_mode}, std::pair{"uid", &node.uid},
                               std::pair{"gid", &node.gid}}) {
        if (!d[key]) continue;
        auto v = Scalar<uint32_t>(d[key], file, where + ".deviceNodes[]." + key);
        if (!v.ok()) return v.status();
        *slot = *v;
      }
      if (!node.type.empty() && node.type != "c" && node.type != "b") {
        return Bad(file, where + ".deviceNodes[].type must be c or b, not " + node.type);
      }
      e.device_nodes.push_back(node);
    }
  }
  if (const YAML::Node mounts = n["mounts"]) {
    if (!mounts.IsSequence()) return Bad(file, where + ".mounts must be a list");
    for (const auto& m : mounts) {
      CdiMount mount;
      auto host = Scalar<std::string>(m["hostPath"], file, where + ".mounts[].hostPath");
      if (!host.ok()) return host.status();
      auto container = Scalar<std::string>(m["containerPath"], file, where + ".mounts[].containerPath");
      if (!container.ok()) return container.status();
      mount.host_path = *host;
      mount.container_path = *container;
      if (mount.container_path.empty() || mount.container_path.front() != '/') {
        return Bad(file, where + ".mounts[].containerPath must be absolute");
      }
      if (m["type"]) mount.type = m["type"].as<std::string>("");
      auto options = StringList(m["options"], file, where + ".mounts[].options");
      if (!options.ok()) return options.status();
      mount.options = *options;
      e.mounts.push_back(mount);
    }
  }
  if (const YAML::Node hooks = n["hooks"]; hooks && hooks.IsSequence()) {
    e.hooks = static_cast<int>(hooks.size());
  }
  return e;
}

// "<vendor>/<class>=<name>" → {"<vendor>/<class>", "<name>"}.
Result<std::pair<std::string, std::string>> SplitDeviceName(const std::string& qualified) {
  const auto eq = qualified.find('=');
  const auto slash = qualified.find('/');
  if (eq == std::string::npos || slash == std::string::npos || slash > eq || slash == 0 ||
      eq == slash + 1 || eq + 1 == qualified.size()) {
    return Status(Code::kInvalidArgument,
                  "CDI device name \"" + qualified + "\" is not <vendor>/<class>=<name>");
  }
  return std::pair{qualified.substr(0, eq), qualified.substr(eq + 1)};
}

bool IsSpecFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

std::string EnvName(const std::string& entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

void CdiEdits::Append(const CdiEdits& other) {
  env.insert(env.end(), other.env.begin(), other.env.end());
  device_nodes.insert(device_nodes.end(), other.device_nodes.begin(), other.device_nodes.end());
  mounts.insert(mounts.end(), other.mounts.begin(), other.mounts.end());
  hooks += other.hooks;
}

Result<CdiSpec> ParseCdiSpec(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Bad(file, std::string("not YAML/JSON: ") + e.what());
  }
  if (!root.IsMap()) return Bad(file, "not a mapping");
  CdiSpec spec;
  spec.file = file;
  if (!root["cdiVersion"]) return Bad(file, "cdiVersion is missing");
  auto kind = Scalar<std::string>(root["kind"], file, "kind");
  if (!kind.ok()) return kind.status();
  spec.kind = *kind;
  if (auto split = SplitDeviceName(spec.kind + "=x"); !split.ok()) {
    return Bad(file, "kind \"" + spec.kind + "\" is not <vendor>/<class>");
  }
  auto common = ParseEdits(root["containerEdits"], file, "containerEdits");
  if (!common.ok()) return common.status();
  spec.common = *common;
  const YAML::Node devices = root["devices"];
  if (!devices || !devices.IsSequence() || devices.size() == 0) {
    return Bad(file, "devices must be a non-empty list");
  }
  for (const auto& d : devices) {
    auto name = Scalar<std::string>(d["name"], file, "devices[].name");
    if (!name.ok()) return name.status();
    if (name->empty()) return Bad(file, "devices[].name is empty");
    auto edits = ParseEdits(d["containerEdits"], file, "devices[" + *name + "].containerEdits");
    if (!edits.ok()) return edits.status();
    if (!spec.devices.emplace(*name, *edits).second) {
      return Bad(file, "device " + *name + " is defined twice");
    }
  }
  return spec;
}

CdiRegistry CdiRegistry::FromSpecs(std::vector<CdiSpec> specs) {
  CdiRegistry r;
  r.specs_ = std::move(specs);
  return r;
}

Result<CdiRegistry> CdiRegistry::Load(const std::vector<std::string>& dirs) {
  std::map<std::string, CdiSpec> by_kind;  // later directories replace earlier ones' kinds
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file(ec) && IsSpecFile(entry.path())) files.push_back(entry.path());
    }
    if (ec) return Status(Code::kInternal, "reading CDI directory " + dir + ": " + ec.message());
    std::sort(files.begin(), files.end());
    std::map<std::string, CdiSpec> here;
    for (const auto& f : files) {
      std::ifstream in(f);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) return Status(Code::kInternal, "reading CDI spec " + f.string() + " failed");
      auto spec = ParseCdiSpec(text.str(), f.string());
      if (!spec.ok()) return spec.status();
      auto [it, fresh] = here.emplace(spec->kind, *spec);
      if (!fresh) {
        // Two files of one directory may split a kind's devices, but never define one twice.
        for (const auto& [name, edits] : spec->devices) {
          if (!it->second.devices.emplace(name, edits).second) {
            return Status(Code::kInvalidArgument, "CDI device " + spec->kind + "=" + name +
                                                      " is defined by both " + it->second.file +
                                                      " and " + f.string());
          }
        }
        it->second.common.Append(spec->common);
      }
    }
    for (auto& [kind, spec] : here) by_kind[kind] = std::move(spec);
  }
  CdiRegistry r;
  for (auto& [kind, spec] : by_kind) r.specs_.push_back(std::move(spec));
  return r;
}

Result<CdiEdits> CdiRegistry::Resolve(const std::vector<std::string>& devices) const {
  CdiEdits out;
  std::set<std::string> kinds_applied;
  for (const auto& qualified : devices) {
    auto split = SplitDeviceName(qualified);
    if (!split.ok()) return split.status();
    const auto& [kind, name] = *split;
    auto spec = std::find_if(specs_.begin(), specs_.end(),
                             [&](const CdiSpec& s) { return s.kind == kind; });
    if (spec == specs_.end()) {
      return Status(Code::kNotFound, "no CDI spec defines kind " + kind + " (for device " +
                                         qualified + ")");
    }
    auto device = spec->devices.find(name);
    if (device == spec->devices.end()) {
      return Status(Code::kNotFound,
                    "CDI spec " + spec->file + " defines no device " + qualified);
    }
    if (kinds_applied.insert(kind).second) out.Append(spec->common);
    out.Append(device->second);
  }
  return out;
}

Status ApplyCdiEdits(nlohmann::json& oci, const CdiEdits& edits) {
  if (!oci.is_object()) return Status(Code::kInvalidArgument, "the OCI spec is not an object");
  nlohmann::json& env = oci["process"]["env"];
  if (!env.is_array()) env = nlohmann::json::array();
  for (const auto& entry : edits.env) {
    const std::string name = EnvName(entry);
    auto same = std::find_if(env.begin(), env.end(), [&](const nlohmann::json& e) {
      return e.is_string() && EnvName(e.get<std::string>()) == name;
    });
    if (same != env.end()) {
      *same = entry;
    } else {
      env.push_back(entry);
    }
  }

  nlohmann::json& linux_section = oci["linux"];
  nlohmann::json& devices = linux_section["devices"];
  if (!devices.is_array()) devices = nlohmann::json::array();
  nlohmann::json& allow = linux_section["resources"]["devices"];
  if (!allow.is_array()) allow = nlohmann::json::array();
  for (const auto& node : edits.device_nodes) {
    std::string type = node.type;
    int64_t major = node.major.value_or(-1), minor = node.minor.value_or(-1);
    uint32_t mode = node.file_mode.value_or(0666);
    if (type.empty() || !node.major || !node.minor || !node.file_mode) {
      // What the spec leaves out comes from the host's node, as CDI runtimes do it.
      const std::string host = node.host_path.empty() ? node.path : node.host_path;
      struct stat st {};
      if (::stat(host.c_str(), &st) != 0) {
        return Status(Code::kNotFound, "CDI device node " + host + " does not exist on this host");
      }
      if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
        return Status(Code::kInvalidArgument, "CDI device node " + host + " is not a device");
      }
      if (type.empty()) type = S_ISCHR(st.st_mode) ? "c" : "b";
      if (!node.major) major = ::major(st.st_rdev);
      if (!node.minor) minor = ::minor(st.st_rdev);
      if (!node.file_mode) mode = st.st_mode & 07777;
    }
    nlohmann::json d = {{"path", node.path}, {"type", type}, {"major", major},
                        {"minor", minor},    {"fileMode", mode}};
    d["uid"] = node.uid.value_or(0);
    d["gid"] = node.gid.value_or(0);
    auto same = std::find_if(devices.begin(), devices.end(), [&](const nlohmann::json& e) {
      return e.value("path", "") == node.path;
    });
    if (same != devices.end()) {
      *same = d;
    } else {
      devices.push_back(d);
    }
    allow.push_back({{"allow", true},
                     {"type", type},
                     {"major", major},
                     {"minor", minor},
                     {"access", node.permissions.empty() ? "rwm" : node.permissions}});
  }

  nlohmann::json& mounts = oci["mounts"];
  if (!mounts.is_array()) mounts = nlohmann::json::array();
  for (const auto& m : edits.mounts) {
    nlohmann::json j = {{"destination", m.container_path},
                        {"source", m.host_path},
                        {"type", m.type.empty() ? "bind" : m.type},
                        {"options", m.options}};
    auto same = std::find_if(mounts.begin(), mounts.end(), [&](const nlohmann::json& e) {
      return e.value("destination", "") == m.container_path;
    });
    if (same != mounts.end()) {
      *same = j;
    } else {
      mounts.push_back(j);
    }
  }
  return OkStatus();
}

}  // namespace stasis
