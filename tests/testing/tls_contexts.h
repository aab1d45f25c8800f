// TLS contexts over the throwaway certificates (tls_certificates.h), for tests: written once
// per test process into $TEST_TMPDIR.
#ifndef PLEXUS_TESTS_TESTING_TLS_CONTEXTS_H_
#define PLEXUS_TESTS_TESTING_TLS_CONTEXTS_H_

#include <memory>
#include <string>

#include "base/auth/tls.h"

namespace plexus::testing {

// The context of certificate `name` ("client", "server", "rogue" or "expired") trusting the
// test CA; null, with a gtest failure naming why, if the files cannot be written or loaded.
std::shared_ptr<const auth::TlsContext> TestTlsContext(const std::string& name);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_TLS_CONTEXTS_H_
