// The validator's errors in test messages, and the check every bad-object table makes: the one
// expected error first, anything after it only the server's notice that CEL rules were skipped.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "api/field_error.h"
#include "api/validation.h"
#include "tests/support/bad_actors.h"

namespace stasis::testing {

inline std::string RenderErrors(const api::FieldErrors& errors) {
  std::string s;
  for (const api::FieldError& e : errors) s += "\n  " + e.ToString();
  return s;
}

inline void ExpectOnlyError(const api::FieldErrors& errors, const BadObject& bad) {
  ASSERT_FALSE(errors.empty()) << bad.name << ": accepted, expected " << bad.expected;
  EXPECT_EQ(errors[0].ToString(), bad.expected) << bad.name << RenderErrors(errors);
  for (size_t i = 1; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].detail, api::kCelSkippedNotice) << bad.name << RenderErrors(errors);
  }
}

}  // namespace stasis::testing
