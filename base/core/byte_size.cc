#include "base/core/byte_size.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace plexus {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view given = text;
  auto bad = [given](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad byte count '", given, "': ", why,
        " (digits, optionally with K, M or G: binary multiples, e.g. 4096, 64K, 4MiB, 1G)"));
  };
  text = absl::StripAsciiWhitespace(text);
  if (absl::EndsWithIgnoreCase(text, "iB")) {
    text.remove_suffix(2);
  } else if (absl::EndsWithIgnoreCase(text, "B")) {
    text.remove_suffix(1);
  }
  int shift = 0;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  text = absl::StripTrailingAsciiWhitespace(text);
  if (text.empty() || !absl::ascii_isdigit(text.front())) return bad("not a count");
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return bad("not a count");
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return bad("too large");
  return value << shift;
}

}  // namespace plexus
