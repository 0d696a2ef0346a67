// The informer's local cache: the latest copy of every object of one resource type, keyed by
// "namespace/name" (or "name" when cluster-scoped), with secondary indexes (e.g. by node).
// Thread-safe; readers get immutable shared snapshots of objects, never references into the
// map, so a reconcile can hold an object while the watch replaces it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stasis {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;
// Maps an object to the index values it is listed under (none, one or several).
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;

// "namespace/name", or "name" for cluster-scoped objects.
std::string ObjectKey(const nlohmann::json& object);
std::string ObjectKey(const std::string& ns, const std::string& name);

class ObjectStore {
 public:
  // Indexes are added before the first object arrives.
  void AddIndex(const std::string& name, IndexFunc func);

  // Returns the previous object, if any.
  ObjectPtr Upsert(ObjectPtr object);
  ObjectPtr Remove(const std::string& key);
  // Replaces the whole content (after a list); returns the objects that vanished.
  std::vector<ObjectPtr> Replace(std::vector<ObjectPtr> objects);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<ObjectPtr> ByIndex(const std::string& index, const std::string& value) const;
  std::vector<std::string> Keys() const;
  size_t size() const;

 private:
  void IndexLocked(const std::string& key, const nlohmann::json* old_obj,
                   const nlohmann::json* new_obj);

  mutable std::shared_mutex mu_;
  std::map<std::string, ObjectPtr> items_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name → value → keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
};

// Ready-made index functions.
IndexFunc IndexByNamespace();
// The string at a JSON pointer, e.g. "/spec/nodeName"; objects without it are not indexed.
IndexFunc IndexByField(const std::string& json_pointer);

}  // namespace stasis
