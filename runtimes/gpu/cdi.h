// Container Device Interface (CDI) specs, applied to an OCI runtime spec the way CDI-aware
// runtimes (containerd, CRI-O, podman) apply them: a device is named "<vendor>/<class>=<name>"
// (e.g. "nvidia.com/gpu=GPU-7870a581-…"), and requesting it applies that device's
// containerEdits plus the spec file's own top-level containerEdits.
//
// stasis runs GPU actors under runsc directly (no CDI-aware runtime in between), so the node
// agent applies the specs itself: the GPU's spec (written by `nvidia-ctk cdi generate`, or by
// hack/gpu-e2e.sh where that tool is absent) and the project's own
// manifests/cdi/stasis-cuda-checkpoint.yaml.
//
// Supported edits: env, deviceNodes, mounts. Hooks are NOT run: CDI hooks (nvidia-ctk's
// create-symlinks, update-ldcache) execute on the host in the container's mount namespace,
// which a gVisor sandbox does not have. A spec with hooks is applied without them and the
// skipped hooks are reported (Resolve's `skipped`), so the caller can say so.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace stasis {

struct CdiDeviceNode {
  std::string path;       // in the container
  std::string host_path;  // on the host; "" = path
  std::string type;       // "c" or "b"; "" = from the host node
  std::optional<int64_t> major, minor;  // unset = from the host node (stat)
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> uid, gid;
  std::string permissions;  // cgroup access, e.g. "rwm"; "" = "rwm"
};

struct CdiMount {
  std::string host_path;
  std::string container_path;
  std::string type;  // "" = "bind"
  std::vector<std::string> options;
};

struct CdiEdits {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<CdiDeviceNode> device_nodes;
  std::vector<CdiMount> mounts;
  int hooks = 0;  // how many hooks were given (never applied, see above)
  void Append(const CdiEdits& other);
};

struct CdiSpec {
  std::string file;  // where it was read from (for messages)
  std::string kind;  // "<vendor>/<class>"
  CdiEdits common;   // the spec's top-level containerEdits
  std::map<std::string, CdiEdits> devices;
};

// Parses one spec (YAML or JSON). Errors name the file and the field.
Result<CdiSpec> ParseCdiSpec(const std::string& text, const std::string& file);

// All specs of the node's CDI directories. Later directories take precedence over earlier
// ones for the same kind (as in the CDI specification: /var/run/cdi over /etc/cdi); two files
// of one directory defining the same device are an error.
class CdiRegistry {
 public:
  // Reads every *.yaml, *.yml and *.json file of each directory; a missing directory is empty.
  static Result<CdiRegistry> Load(const std::vector<std::string>& dirs);
  static CdiRegistry FromSpecs(std::vector<CdiSpec> specs);

  // The combined edits of the fully qualified device names, each spec's common edits once.
  // kNotFound names the first device that no spec defines; kInvalidArgument a malformed name.
  Result<CdiEdits> Resolve(const std::vector<std::string>& devices) const;

  const std::vector<CdiSpec>& specs() const { return specs_; }

 private:
  std::vector<CdiSpec> specs_;  // one per kind
};

// Applies edits to an OCI runtime spec (config.json as JSON): env entries replace the same
// variable, device nodes go to linux.devices (with major/minor/type read from the host node
// when the spec leaves them out) and to linux.resources.devices as allow rules, mounts
// replace a mount at the same destination. kInvalidArgument/kNotFound when a host device
// node cannot be read.
Status ApplyCdiEdits(nlohmann::json& oci_spec, const CdiEdits& edits);

}  // namespace stasis
