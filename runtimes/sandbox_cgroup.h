// Where a node agent running in a container starts its sandboxes: in cgroups of their own under
// the host's cgroup filesystem, outside the agent container's cgroup. The container runtime
// kills every process of a container's cgroup when the container stops (and, with the host's
// PID namespace, there is no namespace whose end would kill them); sandboxes outside it outlive
// the agent, as containerd's shims outlive containerd, and the next agent adopts them.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// The cgroup every sandbox of the node joins, under each hierarchy.
inline constexpr char kSandboxCgroupName[] = "stasis-sandboxes";

// Makes <hierarchy>/stasis-sandboxes under `cgroup_root` (the host's /sys/fs/cgroup, mounted
// over the agent container's own) and returns the cgroup.procs files a sandbox's runsc joins:
//  - cgroup v2 (cgroup.controllers at the root): the one unified hierarchy;
//  - cgroup v1: every hierarchy mounted under the root (each directory with a cgroup.procs;
//    links such as cpu -> cpu,cpuacct are skipped), cpuset's new cgroup given its parent's
//    CPUs and memory nodes, without which it takes no process.
// kInvalidArgument for a relative root; kFailedPrecondition when the root holds no cgroup
// hierarchy or a cgroup cannot be made (the message names it).
[[nodiscard]] Result<std::vector<std::string>> PrepareSandboxCgroups(const std::string& cgroup_root);

}  // namespace stasis
