// The name an actor's sandbox has on its node: the runsc container id, and the name of its
// runsc root, log file and GPU bundle directory. Kubernetes allows a 63-character namespace and
// a 253-character name; runsc's control socket, lock files and the kernel's file-name limit do
// not (a "<ns>_<name>" id broke beyond ~83 characters). So the id is short whatever the name:
// up to 12 characters of the name, for people reading `runsc list`, and 16 hex digits of the
// SHA-256 of "<ns>/<name>", which keep it unique.
// Invariant: at most 29 characters of [a-z0-9.-]; the same actor always gets the same id.
#pragma once

#include <string>

namespace stasis {

std::string SandboxIdFor(const std::string& ns, const std::string& name);

// Whether `id` can name a sandbox directory (status.sandboxID as written by an earlier agent):
// non-empty, at most 255 characters of [A-Za-z0-9._-], and not "." or "..".
bool IsUsableSandboxId(const std::string& id);

}  // namespace stasis
