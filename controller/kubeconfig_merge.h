// Reading kubeconfig files into one view, by clientcmd's loading rules (client-go
// tools/clientcmd/loader.go, ClientConfigLoadingRules.Load): an explicit file (--kubeconfig) is
// read alone and must exist; a KUBECONFIG list is split on ':' (empty and repeated entries
// dropped), missing files are skipped, and the rest are merged: for clusters, users and
// contexts the first file to define a name wins, whole (a later file's entry of the same name is
// discarded, even its fields the first one lacks); current-context comes from the first file
// that sets it. Each entry remembers the file that defined it, so that its relative paths
// resolve against that file's directory, as clientcmd's ResolveLocalPaths does.
// Invariant: every error is kInvalidArgument and names the file (or, when no file could be
// read, every file of the list).
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// One named cluster, user or context: its body (the `cluster:`, `user:` or `context:` map) and
// where it came from.
struct KubeconfigEntry {
  YAML::Node body;
  std::string where;          // "kubeconfig /path/file", for error messages
  std::filesystem::path dir;  // the absolute directory of that file
};

struct MergedKubeconfig {
  std::vector<std::string> files;  // the files that were read, in order
  std::string current_context;     // "" when no file sets it
  std::map<std::string, KubeconfigEntry> clusters, users, contexts;

  // "kubeconfig a" or "kubeconfig a:b", for errors about the merged whole.
  std::string Where() const;
};

// The KUBECONFIG value as a list of paths: split on ':', empty entries and repeats dropped
// (clientcmd deduplicates the list, keeping each path's first position).
std::vector<std::string> SplitKubeconfigList(const std::string& value);

// One file, as --kubeconfig names it: a missing or unreadable file is an error.
Result<MergedKubeconfig> ReadKubeconfigFile(const std::string& path);

// The files of a KUBECONFIG list merged by the rules above. Missing files are skipped; when
// none could be read, or all that exist are empty, the error names them all.
Result<MergedKubeconfig> MergeKubeconfigFiles(const std::vector<std::string>& paths);

}  // namespace stasis
