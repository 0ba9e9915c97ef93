#include "common/grpc/tls_material.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace gdr {
namespace {

// PEM files of certificates and keys are small; anything larger is not one.
constexpr size_t kMaxPemBytes = 1 << 20;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// OpenSSL's reason for the last failure, and the error queue emptied.
std::string OpenSslReason() {
  unsigned long e = ERR_peek_last_error();
  std::string out;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = absl::StrCat(" (", buf, ")");
  }
  ERR_clear_error();
  return out;
}

absl::StatusOr<std::string> ReadPem(const std::string& label, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(label, " ", path));
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat(label, " ", path));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxPemBytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(label, " ", path, ": larger than 1 MiB, not a PEM file"));
    }
  }
  ::close(fd);
  return text;
}

// Every certificate of a PEM text, in order.
absl::StatusOr<std::vector<X509Ptr>> ParseCerts(const std::string& label, const std::string& path,
                                                const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  // The loop ends on "no more PEM blocks" (expected) or on a block that does not parse.
  const unsigned long e = ERR_peek_last_error();
  if (e != 0 && ERR_GET_REASON(e) != PEM_R_NO_START_LINE) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, " ", path, ": a PEM certificate does not parse", OpenSslReason()));
  }
  ERR_clear_error();
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, " ", path, ": no PEM certificate (BEGIN CERTIFICATE) in it"));
  }
  return certs;
}

// Never prompts: an encrypted key has no passphrase to give here.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::Time AsnTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromTimeT(timegm(&tm));
}

std::string Subject(X509* x) {
  BioPtr out(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(out.get(), X509_get_subject_name(x), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

}  // namespace

absl::StatusOr<TlsMaterial> TlsMaterial::Load(const TlsPaths& paths, const std::string& cert_label,
                                              const std::string& key_label,
                                              const std::string& ca_label) {
  TlsMaterial m;
  if (paths.cert.empty() != paths.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_label, " and ", key_label, " go together: give both or neither"));
  }
  ERR_clear_error();
  if (!paths.cert.empty()) {
    GDR_ASSIGN_OR_RETURN(m.cert_pem, ReadPem(cert_label, paths.cert));
    GDR_ASSIGN_OR_RETURN(m.key_pem, ReadPem(key_label, paths.key));
    GDR_ASSIGN_OR_RETURN(std::vector<X509Ptr> chain,
                         ParseCerts(cert_label, paths.cert, m.cert_pem));
    BioPtr bio(BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size())));
    PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
    if (key == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          key_label, " ", paths.key, ": no unencrypted PEM private key (BEGIN PRIVATE KEY) in it",
          OpenSslReason()));
    }
    if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(key_label, " ", paths.key,
                                                     " is not the key of the certificate in ",
                                                     cert_label, " ", paths.cert));
    }
    m.subject = Subject(chain.front().get());
    m.not_before = AsnTime(X509_get0_notBefore(chain.front().get()));
    m.not_after = AsnTime(X509_get0_notAfter(chain.front().get()));
  }
  if (!paths.ca.empty()) {
    GDR_ASSIGN_OR_RETURN(m.ca_pem, ReadPem(ca_label, paths.ca));
    GDR_ASSIGN_OR_RETURN(std::vector<X509Ptr> cas, ParseCerts(ca_label, paths.ca, m.ca_pem));
  }
  return m;
}

std::string TlsMaterial::Describe() const {
  if (!has_identity()) return "no certificate";
  return absl::StrCat(subject.empty() ? "(empty subject)" : subject, ", valid ",
                      absl::FormatTime(absl::RFC3339_sec, not_before, absl::UTCTimeZone()), "..",
                      absl::FormatTime(absl::RFC3339_sec, not_after, absl::UTCTimeZone()));
}

}  // namespace gdr
