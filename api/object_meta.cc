#include "api/object_meta.h"

#include <algorithm>

namespace stasis::api {

std::string ObjectMeta::Key() const { return namespace_.empty() ? name : namespace_ + "/" + name; }

bool ObjectMeta::HasFinalizer(std::string_view finalizer) const {
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

bool ObjectMeta::AddFinalizer(std::string_view finalizer) {
  if (HasFinalizer(finalizer)) return false;
  finalizers.emplace_back(finalizer);
  return true;
}

bool ObjectMeta::RemoveFinalizer(std::string_view finalizer) {
  const auto old_size = finalizers.size();
  std::erase(finalizers, finalizer);
  return finalizers.size() != old_size;
}

}  // namespace stasis::api
