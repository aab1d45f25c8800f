// main() for conformance tests: --backend=STRING selects the backend under test.
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--backend=", 10) == 0) {
      plexus::conformance::SetBackendUnderTest(argv[i] + 10);
    }
  }
  return RUN_ALL_TESTS();
}
