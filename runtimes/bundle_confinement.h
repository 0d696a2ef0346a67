// Where an actor's OCI bundle may come from on this node. The node agent runs runsc as root, and
// runsc's gofer serves the bundle's root filesystem and every bind mount of its config.json to
// the sandbox as root: a spec.bundle anywhere on the host would let whoever may create an Actor
// mount the agent's state, its service-account token or any host directory into a sandbox, and
// a Data restore would empty and unpack into any host directory. So a bundle is used only when:
//
//  - it lies strictly under one of the agent's --bundle-root directories (with
//    --bundle-root-per-namespace: under <root>/<actor namespace>/), named by an absolute path
//    without "." or ".." components;
//  - no component of its path, from "/" down, is a symlink (checked with O_NOFOLLOW, component
//    by component), and <bundle>/config.json is a regular file, not a symlink;
//  - its root filesystem (root.path) and the source of every bind mount (type "bind", or an
//    option "bind"/"rbind") lie strictly under the same (per-namespace) root as the bundle,
//    relative sources taken from the bundle, with the same symlink rule — except a read-only
//    bind ("ro") from one of the operator's --bundle-readonly-source directories;
//  - config.json has no hooks (runsc would run them on the host, as root), no namespace joined
//    by path and no linux.devices (GPU devices are added by the agent itself, from CDI).
//
// The roots themselves are checked once, at startup (ValidateBundleRoots): absolute, existing
// directories without symlinks, never "/", never holding (or inside) the agent's own directories.
// Every refusal is kPermissionDenied with reason kBundleNotAllowed and a message naming the rule.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

inline constexpr char kBundleNotAllowed[] = "bundle_not_allowed";

struct BundleRoots {
  std::vector<std::string> roots;  // --bundle-root, absolute and normal
  bool per_namespace = false;      // --bundle-root-per-namespace
  // --bundle-readonly-source: host directories (e.g. /usr) a bind mount with the "ro" option
  // may take its source from (the directory itself or under it), outside the bundle's root.
  // An operator's choice per node: whatever is there becomes readable by every sandbox.
  std::vector<std::string> readonly_sources;
};

// The agent's own directories, which no bundle root may hold or lie in. `state_root` (--root)
// may hold a bundle root (the DaemonSet's /var/lib/stasis/bundles) but no bundle root may hold
// it; `private_dirs` (run/, logs/, snapshots/, the GPU bundles, the snapshot store, the
// service-account token) may neither hold nor lie inside one.
struct AgentDirs {
  std::string state_root;
  std::vector<std::string> private_dirs;
};

// Startup check of --bundle-root. kInvalidArgument naming the flag and the rule broken.
[[nodiscard]] Status ValidateBundleRoots(const BundleRoots& roots, const AgentDirs& own);

// The effective root (the --bundle-root, or <root>/<namespace>) `bundle` lies under, or the
// refusal. Reads the file system (each component with O_NOFOLLOW, config.json); writes nothing.
// A missing or unparsable config.json is kInvalidArgument "bad_bundle" (runsc's own check).
Result<std::string> ConfineBundle(const std::string& bundle, const std::string& ns, const BundleRoots& roots);

// The directory rules alone (the root, the path, no symlink): for a micro-VM bundle, which has
// no config.json.
Result<std::string> ConfineBundleDir(const std::string& bundle, const std::string& ns, const BundleRoots& roots);

// Lexical rules only (no file system): absolute, no "." / ".." / empty components. The reason
// is "" when `path` is acceptable, else why not.
std::string LexicalPathProblem(const std::string& path);

// Whether some component of `path` (absolute, lexically clean), from "/" down, is a symlink.
// "" when none is; else a sentence naming the component or the error. With `missing_ok`, a
// path that ends early (a missing component) is "": what does not exist is not a symlink, and
// runsc's own bundle check (runsc_driver.h CheckBundle) says what is missing.
std::string SymlinkProblem(const std::string& path, bool missing_ok);

}  // namespace stasis
