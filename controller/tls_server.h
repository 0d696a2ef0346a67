// Server-side TLS for the process's own HTTP endpoint (http_endpoints.h): a certificate and key
// loaded from a directory (tls.crt / tls.key, as a kubernetes.io/tls Secret mounts them) or,
// without one, a self-signed pair generated in memory at start (controller-runtime's secure
// metrics server does the same), and non-blocking sessions over already-accepted sockets.
//
// Invariants: sessions never block (a read or write that would says which poll event it waits
// for); the private key never leaves memory; TLS 1.2 is the oldest version accepted.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

struct ssl_ctx_st;
struct ssl_st;

namespace stasis {

// What one non-blocking read or write did: `bytes` moved, or what it waits for.
struct IoStep {
  enum Want { kDone, kRead, kWrite, kClosed };
  size_t bytes = 0;
  Want want = kDone;
};

// One TLS connection, server side; the socket is not owned (the caller closes it after this).
class TlsSession {
 public:
  explicit TlsSession(ssl_st* ssl) : ssl_(ssl) {}
  ~TlsSession();  // a best-effort close_notify, never waiting for the peer's
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // The handshake runs inside the first reads and writes.
  IoStep Read(char* buf, size_t len);
  IoStep Write(const char* buf, size_t len);

 private:
  IoStep Step(int rc);
  ssl_st* ssl_;
  bool failed_ = false;
};

class TlsServerContext {
 public:
  // dir/tls.crt (the certificate, then any intermediates) and dir/tls.key (PEM). kInvalidArgument
  // when they are missing, unreadable or do not match.
  static Result<std::shared_ptr<TlsServerContext>> FromDir(const std::string& dir);
  // A fresh key (ECDSA P-256) and a certificate for it, self-signed, valid for a year, naming
  // `hosts` (DNS names or IP addresses) as subjectAltNames. Clients cannot verify it against a
  // CA: they must skip verification (or pin this certificate).
  static Result<std::shared_ptr<TlsServerContext>> SelfSigned(const std::vector<std::string>& hosts);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // A server session over the connected, non-blocking socket `fd`; nullptr when OpenSSL fails.
  std::unique_ptr<TlsSession> NewSession(int fd) const;
  // The certificate served, PEM (what a client would pin).
  const std::string& certificate_pem() const { return certificate_pem_; }

 private:
  TlsServerContext(ssl_ctx_st* ctx, std::string certificate_pem)
      : ctx_(ctx), certificate_pem_(std::move(certificate_pem)) {}
  ssl_ctx_st* ctx_;
  std::string certificate_pem_;
};

}  // namespace stasis
