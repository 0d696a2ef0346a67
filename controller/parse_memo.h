// Parsed forms of an informer cache's objects, kept while the cache keeps the same object.
//
// The cache never changes an object in place: an update replaces its pointer (object_store.h).
// So a parse made from one pointer stays right for as long as that pointer is listed, and a
// reconciler that needs every Worker (or every actor of an index) parsed on each reconcile pays
// for the objects that changed since its last call, not for the whole fleet. What is not listed
// any more is forgotten (and its pointer released) at the next call.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/object_store.h"

namespace stasis {

template <typename T>
class ParseMemo {
 public:
  // nullopt: the object does not parse; it is left out (and remembered as such).
  using Parse = std::function<std::optional<T>(const nlohmann::json&)>;
  explicit ParseMemo(Parse parse) : parse_(std::move(parse)) {}

  // The parsed form of each of `objects` that parses, in their order. Safe to call from
  // several reconciles at once.
  std::vector<std::shared_ptr<const T>> ParseAll(const std::vector<ObjectPtr>& objects) {
    std::lock_guard lock(mu_);
    std::map<const nlohmann::json*, Entry> seen;
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(objects.size());
    for (const auto& object : objects) {
      auto it = entries_.find(object.get());
      Entry entry = it != entries_.end() ? std::move(it->second) : Entry{object, Parsed(*object)};
      if (entry.parsed) out.push_back(entry.parsed);
      seen.emplace(object.get(), std::move(entry));
    }
    entries_ = std::move(seen);
    return out;
  }

  // How many objects were parsed, ever (for tests: a call with nothing new parses nothing).
  size_t parses() const {
    std::lock_guard lock(mu_);
    return parses_;
  }

 private:
  struct Entry {
    ObjectPtr object;  // held, so that its address is never another object's while remembered
    std::shared_ptr<const T> parsed;
  };

  std::shared_ptr<const T> Parsed(const nlohmann::json& object) {
    ++parses_;
    std::optional<T> parsed = parse_(object);
    return parsed ? std::make_shared<const T>(std::move(*parsed)) : nullptr;
  }

  Parse parse_;
  mutable std::mutex mu_;
  std::map<const nlohmann::json*, Entry> entries_;
  size_t parses_ = 0;
};

}  // namespace stasis
