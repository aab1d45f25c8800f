#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
TEST(Smoke, Absl) { absl::StatusOr<int> x = 3; EXPECT_EQ(absl::StrCat(*x), "3"); }
