// One root of snapshots (the node-local one or the store) as a tree of directories:
// <root>/<ns>/<name>/<id>/ — listing what is complete, removing, sweeping crash leftovers.
// Invariant: a snapshot never looks complete while it is being removed: its directory is
// renamed to <id>.partial (atomic) first, and *.partial is never read as a snapshot.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "snapshots/manifest.h"

namespace stasis {

// Complete snapshots of one actor under `root`, oldest first by taken_at, then id (manifests
// read, not verified). Empty when `root` is empty or the names are invalid.
std::vector<SnapshotManifest> ListSnapshots(const std::string& root, const std::string& ns,
                                            const std::string& name);

// Removes <parent>/<id> by way of <parent>/<id>.partial (see the invariant above).
Status RemoveSnapshotDir(const std::filesystem::path& parent, const std::string& id);

// Removes <root>/<ns>/<name>: its complete snapshots one by one (each stops looking complete
// first), then the rest.
Status RemoveActorDir(const std::filesystem::path& dir);

// Removes every <root>/*/*/*.partial; returns how many.
int RemovePartialsUnder(const std::string& root);

// The (namespace, name) pairs with a directory under `root` whose names are valid, sorted.
std::vector<std::pair<std::string, std::string>> ActorsUnder(const std::string& root);

}  // namespace stasis
