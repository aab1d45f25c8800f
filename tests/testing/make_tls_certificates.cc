// make_tls_certificates DIR NAME...: writes a throwaway CA and certificates into DIR.
#include <cstdio>
#include <string>
#include <vector>

#include "tests/testing/tls_certificates.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [NAME...]\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> names(argv + 2, argv + argc);
  const absl::Status written = plexus::testing::WriteTlsCertificates(argv[1], names);
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  return 0;
}
