// One parsed copy per object version, shared between caches: the node agent watches its actors
// through two informers (pinned here, bound here), and an actor that is both would otherwise be
// held twice. Objects are keyed by uid + resourceVersion, which name one immutable version.
// Thread-safe; holds weak references only, so a version no cache holds any more is freed.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "controller/object_store.h"

namespace stasis {

class ObjectPool {
 public:
  // The pooled copy of fresh's version if a cache still holds one, else fresh (now pooled).
  // Objects without a uid or resourceVersion are returned as they are.
  ObjectPtr Intern(ObjectPtr fresh);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<const nlohmann::json>> by_version_;
  size_t sweep_at_ = 1024;  // drop expired entries when the map grows past this
};

}  // namespace stasis
