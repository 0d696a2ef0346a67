#include "controller/tls_server.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <filesystem>

namespace stasis {
namespace {

std::string OpenSslError(const std::string& what) {
  std::string message = what;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    message += std::string(": ") + buf;
  }
  return message;
}

Status Invalid(const std::string& what) {
  return Status(Code::kInvalidArgument, OpenSslError(what));
}

// A server context with modern defaults: TLS 1.2 or newer, no renegotiation, no compression.
Result<SSL_CTX*> NewServerContext() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status(Code::kInternal, OpenSslError("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  // A partial SSL_write may be retried with a moved buffer (the answer string is stable, but
  // the pointer advances with what was sent).
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  return ctx;
}

std::string CertificatePem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  return pem;
}

// "DNS:name" or "IP:1.2.3.4" for each host, comma-separated.
std::string SubjectAltNames(const std::vector<std::string>& hosts) {
  std::string san;
  for (const auto& h : hosts) {
    unsigned char buf[16];
    const bool ip = inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
    san += (san.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + h;
  }
  return san;
}

// A self-signed X.509 v3 certificate for `key`, naming `hosts`.
X509* SelfSignedCertificate(EVP_PKEY* key, const std::vector<std::string>& hosts) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60 * 60);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 60 * 60);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  const std::string cn = hosts.empty() ? "stasis" : hosts.front();
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> exts = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature"},
      {NID_ext_key_usage, "serverAuth"}};
  if (!hosts.empty()) exts.emplace_back(NID_subject_alt_name, SubjectAltNames(hosts));
  for (const auto& [nid, value] : exts) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
    if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) {
      X509_EXTENSION_free(ext);
      X509_free(cert);
      return nullptr;
    }
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(cert, key, EVP_sha256()) == 0) {
    X509_free(cert);
    return nullptr;
  }
  return cert;
}

}  // namespace

TlsSession::~TlsSession() {
  // close_notify if the session is sound (never after a fatal error); never waits for the
  // peer's. Its failure on a half-done handshake leaves errors for no one: clear them.
  if (!failed_) SSL_shutdown(ssl_);
  ERR_clear_error();
  SSL_free(ssl_);
}

IoStep TlsSession::Step(int rc) {
  if (rc > 0) return {static_cast<size_t>(rc), IoStep::kDone};
  switch (SSL_get_error(ssl_, rc)) {
    case SSL_ERROR_WANT_READ:
      return {0, IoStep::kRead};
    case SSL_ERROR_WANT_WRITE:
      return {0, IoStep::kWrite};
    default:
      // The peer closed, spoke something that is not TLS (plain HTTP), or failed the
      // handshake: nothing more can be exchanged.
      ERR_clear_error();
      failed_ = true;
      return {0, IoStep::kClosed};
  }
}

IoStep TlsSession::Read(char* buf, size_t len) {
  return Step(SSL_read(ssl_, buf, static_cast<int>(len)));
}

IoStep TlsSession::Write(const char* buf, size_t len) {
  return Step(SSL_write(ssl_, buf, static_cast<int>(len)));
}

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::FromDir(const std::string& dir) {
  const std::string crt = dir + "/tls.crt", key = dir + "/tls.key";
  for (const auto& f : {crt, key}) {
    if (!std::filesystem::exists(f)) {
      return Status(Code::kInvalidArgument, "metrics certificate: " + f + " does not exist");
    }
  }
  auto ctx = NewServerContext();
  if (!ctx.ok()) return ctx.status();
  auto fail = [&](const std::string& what) {
    SSL_CTX_free(*ctx);
    return Invalid(what);
  };
  if (SSL_CTX_use_certificate_chain_file(*ctx, crt.c_str()) != 1) return fail("load " + crt);
  if (SSL_CTX_use_PrivateKey_file(*ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) return fail("load " + key);
  if (SSL_CTX_check_private_key(*ctx) != 1) return fail(key + " does not match " + crt);
  std::string pem = CertificatePem(SSL_CTX_get0_certificate(*ctx));
  return std::shared_ptr<TlsServerContext>(new TlsServerContext(*ctx, std::move(pem)));
}

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::SelfSigned(
    const std::vector<std::string>& hosts) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return Status(Code::kInternal, OpenSslError("generate the metrics key"));
  X509* cert = SelfSignedCertificate(key, hosts);
  if (cert == nullptr) {
    EVP_PKEY_free(key);
    return Status(Code::kInternal, OpenSslError("sign the metrics certificate"));
  }
  auto ctx = NewServerContext();
  Status s = ctx.ok() ? OkStatus() : ctx.status();
  if (s.ok() && (SSL_CTX_use_certificate(*ctx, cert) != 1 || SSL_CTX_use_PrivateKey(*ctx, key) != 1)) {
    SSL_CTX_free(*ctx);
    s = Status(Code::kInternal, OpenSslError("use the metrics certificate"));
  }
  std::string pem = CertificatePem(cert);
  X509_free(cert);  // the context holds its own references
  EVP_PKEY_free(key);
  if (!s.ok()) return s;
  return std::shared_ptr<TlsServerContext>(new TlsServerContext(*ctx, std::move(pem)));
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<TlsSession> TlsServerContext::NewSession(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  if (SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return std::make_unique<TlsSession>(ssl);
}

}  // namespace stasis
