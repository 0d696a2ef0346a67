// The OCI runtime spec (a bundle's config.json) of an actor started from an image: the image
// config's defaults with the actor's overrides applied as a Pod's container applies them —
//   command given:  it replaces Entrypoint, and Cmd is dropped unless args are given too;
//   args given:     they replace Cmd;
//   env:            the image's variables, then the actor's (a name given twice: the actor's
//                   value, at the image's position);
//   workingDir:     replaces WorkingDir ("/" when neither gives one);
// and the rest fixed by the agent: the rootfs (shared, read by every actor of the image, never
// written: runsc's root overlay takes the writes), the hostname, the default mounts of a
// container (/proc, /dev, /dev/pts, /dev/shm, /sys read-only), Docker's default capability
// set, no new privileges, the namespaces runsc needs. No hooks, no host bind mounts, no
// devices: GPU actors get theirs from CDI afterwards (runtimes/gpu/gpu_bundle.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "images/oci_manifest.h"

namespace stasis::images {

struct RuntimeSpecRequest {
  ImageConfig image;
  std::vector<std::string> command;  // spec.command; empty: the image's Entrypoint
  std::vector<std::string> args;     // spec.args; empty: the image's Cmd (unless command given)
  std::vector<std::pair<std::string, std::string>> env;  // spec.env
  std::string working_dir;           // spec.workingDir
  std::string rootfs;                // absolute path of the unpacked image
  std::string hostname;
};

// kInvalidArgument reason "bad_image_config" when nothing would run (no entrypoint, cmd or
// command), the working directory is relative, or the image's User is not numeric
// ("uid" or "uid:gid": the agent does not read the image's /etc/passwd).
[[nodiscard]] Result<nlohmann::json> BuildRuntimeSpec(const RuntimeSpecRequest& request);

}  // namespace stasis::images
