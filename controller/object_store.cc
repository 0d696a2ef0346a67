#include "controller/object_store.h"

#include <mutex>

namespace stasis {

using nlohmann::json;

std::string ObjectKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string ObjectKey(const json& object) {
  const auto& meta = object.at("metadata");
  return ObjectKey(meta.value("namespace", ""), meta.value("name", ""));
}

void ObjectStore::AddIndex(const std::string& name, IndexFunc func) {
  std::unique_lock lock(mu_);
  index_funcs_[name] = std::move(func);
  auto& idx = indexes_[name];
  idx.clear();
  for (const auto& [key, obj] : items_) {
    for (const auto& v : index_funcs_[name](*obj)) idx[v].insert(key);
  }
}

void ObjectStore::IndexLocked(const std::string& key, const json* old_obj, const json* new_obj) {
  for (const auto& [name, func] : index_funcs_) {
    auto& idx = indexes_[name];
    if (old_obj) {
      for (const auto& v : func(*old_obj)) {
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
    if (new_obj) {
      for (const auto& v : func(*new_obj)) idx[v].insert(key);
    }
  }
}

ObjectPtr ObjectStore::Upsert(ObjectPtr object) {
  const std::string key = ObjectKey(*object);
  std::unique_lock lock(mu_);
  ObjectPtr old;
  if (auto it = items_.find(key); it != items_.end()) old = it->second;
  IndexLocked(key, old.get(), object.get());
  items_[key] = std::move(object);
  return old;
}

ObjectPtr ObjectStore::Remove(const std::string& key) {
  std::unique_lock lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return nullptr;
  ObjectPtr old = it->second;
  IndexLocked(key, old.get(), nullptr);
  items_.erase(it);
  return old;
}

std::vector<ObjectPtr> ObjectStore::Replace(std::vector<ObjectPtr> objects) {
  std::map<std::string, ObjectPtr> next;
  for (auto& o : objects) next[ObjectKey(*o)] = std::move(o);
  std::unique_lock lock(mu_);
  std::vector<ObjectPtr> vanished;
  for (const auto& [key, obj] : items_) {
    if (!next.count(key)) vanished.push_back(obj);
  }
  items_ = std::move(next);
  for (auto& [name, idx] : indexes_) {
    idx.clear();
    for (const auto& [key, obj] : items_) {
      for (const auto& v : index_funcs_[name](*obj)) idx[v].insert(key);
    }
  }
  return vanished;
}

ObjectPtr ObjectStore::Get(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> ObjectStore::List() const {
  std::shared_lock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [key, obj] : items_) out.push_back(obj);
  return out;
}

std::vector<ObjectPtr> ObjectStore::ByIndex(const std::string& index, const std::string& value) const {
  std::shared_lock lock(mu_);
  std::vector<ObjectPtr> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return out;
  for (const auto& key : keys->second) out.push_back(items_.at(key));
  return out;
}

std::vector<std::string> ObjectStore::Keys() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, obj] : items_) out.push_back(key);
  return out;
}

size_t ObjectStore::size() const {
  std::shared_lock lock(mu_);
  return items_.size();
}

IndexFunc IndexByNamespace() {
  return [](const json& o) -> std::vector<std::string> {
    auto ns = o.at("metadata").value("namespace", "");
    if (ns.empty()) return {};
    return {ns};
  };
}

IndexFunc IndexByField(const std::string& pointer) {
  json::json_pointer ptr(pointer);
  return [ptr](const json& o) -> std::vector<std::string> {
    if (!o.contains(ptr)) return {};
    const auto& v = o.at(ptr);
    if (!v.is_string() || v.get<std::string>().empty()) return {};
    return {v.get<std::string>()};
  };
}

}  // namespace stasis
