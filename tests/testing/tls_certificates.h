// Throwaway TLS material for tests and the benchmark's --tls: a CA, certificates it signs, and
// a second, untrusted CA with its own. EC P-256 keys, valid from an hour ago for ten years.
#ifndef PLEXUS_TESTS_TESTING_TLS_CERTIFICATES_H_
#define PLEXUS_TESTS_TESTING_TLS_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace plexus::testing {

// Writes into `directory` (which must exist): ca.pem (the trusted CA), and for each name
// NAME.pem / NAME.key signed by it; rogue_ca.pem and rogue.pem / rogue.key signed by that
// other CA; expired.pem / expired.key, signed by the trusted CA but expired yesterday.
absl::Status WriteTlsCertificates(const std::string& directory,
                                  const std::vector<std::string>& names);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_TLS_CERTIFICATES_H_
