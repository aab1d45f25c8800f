#include "tests/testing/tls_certificates.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace plexus::testing {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertificateFree {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Certificate = std::unique_ptr<X509, CertificateFree>;

// `issuer`/`issuer_key` null: self-signed.
// Valid from an hour ago for ten years, or (`expired`) from two days ago until yesterday.
Certificate Sign(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                 bool authority, long serial, bool expired = false) {
  Certificate certificate(X509_new());
  X509_set_version(certificate.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(certificate.get()), serial);
  constexpr long kDay = 24 * 3600;
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), expired ? -2 * kDay : -3600);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), expired ? -kDay : 10L * 365 * kDay);
  X509_NAME* subject = X509_get_subject_name(certificate.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(certificate.get(),
                       issuer != nullptr ? X509_get_subject_name(issuer) : subject);
  X509_set_pubkey(certificate.get(), key);
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer != nullptr ? issuer : certificate.get(), certificate.get(),
                 nullptr, nullptr, 0);
  X509_EXTENSION* constraints = X509V3_EXT_conf_nid(nullptr, &context, NID_basic_constraints,
                                                    authority ? "critical,CA:TRUE" : "CA:FALSE");
  X509_add_ext(certificate.get(), constraints, -1);
  X509_EXTENSION_free(constraints);
  if (authority) {
    X509_EXTENSION* usage =
        X509V3_EXT_conf_nid(nullptr, &context, NID_key_usage, "critical,keyCertSign,cRLSign");
    X509_add_ext(certificate.get(), usage, -1);
    X509_EXTENSION_free(usage);
  }
  X509_sign(certificate.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256());
  return certificate;
}

absl::Status WritePem(const std::string& path, X509* certificate, EVP_PKEY* key) {
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return absl::InternalError(absl::StrCat("cannot write ", path));
  const bool written = certificate != nullptr ? PEM_write_X509(file, certificate) == 1
                                              : PEM_write_PrivateKey(file, key, nullptr, nullptr, 0,
                                                                     nullptr, nullptr) == 1;
  std::fclose(file);
  if (!written) return absl::InternalError(absl::StrCat("cannot write PEM to ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTlsCertificates(const std::string& directory,
                                  const std::vector<std::string>& names) {
  Key ca_key(EVP_EC_gen("P-256"));
  Key rogue_ca_key(EVP_EC_gen("P-256"));
  if (ca_key == nullptr || rogue_ca_key == nullptr) {
    return absl::InternalError("cannot generate EC keys");
  }
  Certificate ca = Sign("plexus test CA", ca_key.get(), nullptr, nullptr, true, 1);
  Certificate rogue_ca = Sign("untrusted CA", rogue_ca_key.get(), nullptr, nullptr, true, 1);
  if (absl::Status s = WritePem(directory + "/ca.pem", ca.get(), nullptr); !s.ok()) return s;
  if (absl::Status s = WritePem(directory + "/rogue_ca.pem", rogue_ca.get(), nullptr); !s.ok()) {
    return s;
  }
  std::vector<std::pair<std::string, bool>> leaves;
  for (const std::string& name : names) leaves.emplace_back(name, false);
  leaves.emplace_back("rogue", true);
  leaves.emplace_back("expired", false);
  long serial = 2;
  for (const auto& [name, rogue] : leaves) {
    Key key(EVP_EC_gen("P-256"));
    if (key == nullptr) return absl::InternalError("cannot generate an EC key");
    Certificate leaf = Sign(name, key.get(), rogue ? rogue_ca.get() : ca.get(),
                            rogue ? rogue_ca_key.get() : ca_key.get(), false, serial++,
                            /*expired=*/name == "expired");
    if (absl::Status s = WritePem(absl::StrCat(directory, "/", name, ".pem"), leaf.get(), nullptr);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = WritePem(absl::StrCat(directory, "/", name, ".key"), nullptr, key.get());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace plexus::testing
