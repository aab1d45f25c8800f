#include "tests/testing/tls_contexts.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/testing/tls_certificates.h"

namespace plexus::testing {

std::shared_ptr<const auth::TlsContext> TestTlsContext(const std::string& name) {
  // Written once: each call of WriteTlsCertificates makes a new CA.
  static const std::string* const directory = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto* path = new std::string(tmp != nullptr ? tmp : "/tmp");
    const absl::Status written = WriteTlsCertificates(*path, {"client", "server"});
    EXPECT_TRUE(written.ok()) << written;
    return path;
  }();
  const std::string path = *directory + "/" + name;
  auto context = auth::TlsContext::Create({path + ".pem", path + ".key", *directory + "/ca.pem"});
  EXPECT_TRUE(context.ok()) << context.status();
  return context.ok() ? *context : nullptr;
}

}  // namespace plexus::testing
