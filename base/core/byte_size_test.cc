#include "base/core/byte_size.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

TEST(ByteSizeTest, CountsAndBinaryMultiplesInAnySpelling) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("4k"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KB"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("64m"), uint64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("4MiB"), uint64_t{4} << 20);
  EXPECT_EQ(*ParseByteSize("1G"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize(" 2 GiB "), uint64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("12B"), 12u);
}

TEST(ByteSizeTest, AnythingElseIsAnErrorNamingTheText) {
  for (const char* text : {"", "K", "MiB", "-4K", "4X", "4.5M", "four", "4KK", "+4"}) {
    absl::StatusOr<uint64_t> parsed = ParseByteSize(text);
    ASSERT_FALSE(parsed.ok()) << "'" << text << "' gave " << *parsed;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(std::string("'") + text + "'"));
  }
  EXPECT_THAT(ParseByteSize("17179869184G").status().message(), HasSubstr("too large"));
  EXPECT_EQ(*ParseByteSize("16777215G"), uint64_t{16777215} << 30);
}

}  // namespace
}  // namespace plexus
