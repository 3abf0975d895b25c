// SHA1 for EVALSHA: computed locally so the first call needs no SCRIPT LOAD
// round trip. Not used for anything security-related. OpenSSL's, already
// linked for TLS.
#include <dlock/redis/script.hpp>

#include <openssl/sha.h>

#include <stdexcept>

namespace dlock::redis {

std::string sha1_hex(std::string_view bytes) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  if (!SHA1(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest))
    throw std::runtime_error("dlock: OpenSSL cannot compute a SHA1 (is SHA1 disabled in its configuration?)");
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char byte : digest) {
    out += hex[byte >> 4];
    out += hex[byte & 0xF];
  }
  return out;
}

script::script(std::string source) {
  auto d = std::make_shared<data>();
  d->sha1 = sha1_hex(source);
  d->source = std::move(source);
  data_ = std::move(d);
}

}  // namespace dlock::redis
