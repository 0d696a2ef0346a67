// JSON merge patches (RFC 7386) between two versions of an object: the patch that turns
// `from` into `to`. Applying it with nlohmann::json::merge_patch() to `from` yields `to`, and
// applying it to any object that has extra keys leaves those keys alone, which is how stasis
// keeps fields it does not know (written by a newer version) through a read-modify-write.
// Invariant: a key present in `from` and absent in `to` becomes null in the patch; arrays and
// scalars are replaced whole; equal inputs give an empty object.
#pragma once

#include <nlohmann/json.hpp>

namespace stasis::api {

nlohmann::json CreateMergePatch(const nlohmann::json& from, const nlohmann::json& to);

}  // namespace stasis::api
