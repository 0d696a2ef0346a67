#include "controller/kubeconfig_merge.h"

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

Status Invalid(const std::string& where, const std::string& what) {
  return Status(Code::kInvalidArgument, where + ": " + what);
}

// The three named lists of a kubeconfig and the key of each entry's body.
struct NamedList {
  const char* list;
  const char* key;
  std::map<std::string, KubeconfigEntry> MergedKubeconfig::*into;
};
constexpr NamedList kNamedLists[] = {
    {"clusters", "cluster", &MergedKubeconfig::clusters},
    {"users", "user", &MergedKubeconfig::users},
    {"contexts", "context", &MergedKubeconfig::contexts},
};

// One file's named entries of `list`, checked (a list of maps with unique names; clientcmd
// refuses a name repeated within one file) and added to `into` unless an earlier file
// defined the name: the first file wins, whole.
Status MergeList(const YAML::Node& root, const NamedList& named, const KubeconfigEntry& origin,
                 MergedKubeconfig& into) {
  const YAML::Node seq = root[named.list];
  if (!seq || seq.IsNull()) return OkStatus();
  const std::string list = named.list;
  if (!seq.IsSequence()) return Invalid(origin.where, "'" + list + "' must be a list");
  std::set<std::string> seen;
  for (const auto& item : seq) {
    if (!item.IsMap() || !item["name"] || !item["name"].IsScalar() ||
        item["name"].as<std::string>().empty()) {
      return Invalid(origin.where, "an entry of '" + list + "' has no name");
    }
    const std::string name = item["name"].as<std::string>();
    if (!seen.insert(name).second) {
      return Invalid(origin.where, "'" + list + "' names '" + name + "' twice");
    }
    KubeconfigEntry entry = origin;
    entry.body = item[named.key];
    (into.*named.into).emplace(name, std::move(entry));  // no-op when an earlier file has it
  }
  return OkStatus();
}

enum class FileState { kRead, kMissing, kEmpty };

// Reads `path` into `into` by the merge rules. kMissing (and nothing added) when the file does
// not exist; kEmpty when it holds no YAML document.
Result<FileState> MergeFile(const std::string& path, MergedKubeconfig& into) {
  const std::string where = "kubeconfig " + path;
  std::error_code ec;
  if (!fs::exists(path, ec)) return FileState::kMissing;
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path, ec)) return Invalid(where, "cannot be read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Invalid(where, "cannot be read");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Invalid(where, std::string("is not valid YAML: ") + e.what());
  }
  if (root.IsNull()) return FileState::kEmpty;
  if (!root.IsMap()) return Invalid(where, "is not a YAML map");
  const KubeconfigEntry origin{YAML::Node(), where, fs::absolute(path).parent_path()};
  try {
    for (const auto& named : kNamedLists) {
      if (Status s = MergeList(root, named, origin, into); !s.ok()) return s;
    }
    const YAML::Node current = root["current-context"];
    if (current && !current.IsScalar()) return Invalid(where, "current-context must be a string");
    if (into.current_context.empty() && current) into.current_context = current.as<std::string>();
  } catch (const YAML::Exception& e) {
    return Invalid(where, std::string("has a field of the wrong type: ") + e.what());
  }
  into.files.push_back(path);
  return FileState::kRead;
}

}  // namespace

std::string MergedKubeconfig::Where() const {
  std::string joined;
  for (const auto& f : files) joined += (joined.empty() ? "" : ":") + f;
  return "kubeconfig " + joined;
}

std::vector<std::string> SplitKubeconfigList(const std::string& value) {
  std::vector<std::string> paths;
  std::set<std::string> seen;
  std::stringstream in(value);
  for (std::string path; std::getline(in, path, ':');) {
    if (!path.empty() && seen.insert(path).second) paths.push_back(path);
  }
  return paths;
}

Result<MergedKubeconfig> ReadKubeconfigFile(const std::string& path) {
  MergedKubeconfig merged;
  auto state = MergeFile(path, merged);
  if (!state.ok()) return state.status();
  if (*state == FileState::kMissing) return Invalid("kubeconfig " + path, "cannot be read");
  if (*state == FileState::kEmpty) merged.files.push_back(path);
  return merged;
}

Result<MergedKubeconfig> MergeKubeconfigFiles(const std::vector<std::string>& paths) {
  MergedKubeconfig merged;
  std::string skipped;  // "a (missing), b (empty)"
  for (const auto& path : paths) {
    auto state = MergeFile(path, merged);
    if (!state.ok()) return state.status();
    if (*state != FileState::kRead) {
      skipped += (skipped.empty() ? "" : ", ") + path +
                 (*state == FileState::kMissing ? " (missing)" : " (empty)");
    }
  }
  if (merged.files.empty()) {
    return Status(Code::kInvalidArgument,
                  "KUBECONFIG: no kubeconfig could be read from its files: " +
                      (skipped.empty() ? std::string("the list is empty") : skipped));
  }
  return merged;
}

}  // namespace stasis
