#include "controller/object_pool.h"

#include <algorithm>

namespace stasis {

ObjectPtr ObjectPool::Intern(ObjectPtr fresh) {
  const auto meta = fresh->find("metadata");
  if (meta == fresh->end() || !meta->is_object()) return fresh;
  const std::string uid = meta->value("uid", ""), rv = meta->value("resourceVersion", "");
  if (uid.empty() || rv.empty()) return fresh;
  const std::string key = uid + "@" + rv;
  std::lock_guard lock(mu_);
  auto& slot = by_version_[key];
  if (ObjectPtr held = slot.lock()) return held;
  slot = fresh;
  if (by_version_.size() > sweep_at_) {
    std::erase_if(by_version_, [](const auto& entry) { return entry.second.expired(); });
    sweep_at_ = std::max<size_t>(1024, 2 * by_version_.size());
  }
  return fresh;
}

size_t ObjectPool::size() const {
  std::lock_guard lock(mu_);
  return by_version_.size();
}

}  // namespace stasis
