// SHA1 (FIPS 180-4) for EVALSHA: computed locally so the first call needs no
// SCRIPT LOAD round trip. Not used for anything security-related.
#include <dlock/redis/script.hpp>

#include <array>
#include <cstdint>

namespace dlock::redis {
namespace {

std::uint32_t rotl(std::uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

void compress(std::array<std::uint32_t, 5>& h, const unsigned char* block) {
  std::uint32_t w[80];
  for (int i = 0; i < 16; ++i)
    w[i] = std::uint32_t(block[4 * i]) << 24 | std::uint32_t(block[4 * i + 1]) << 16 |
           std::uint32_t(block[4 * i + 2]) << 8 | std::uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  auto [a, b, c, d, e] = h;
  for (int i = 0; i < 80; ++i) {
    std::uint32_t f, k;
    if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
    else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
    else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
    else f = b ^ c ^ d, k = 0xCA62C1D6;
    std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rotl(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

}  // namespace

std::string sha1_hex(std::string_view bytes) {
  std::array<std::uint32_t, 5> h{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  std::size_t full = bytes.size() / 64 * 64;
  for (std::size_t i = 0; i < full; i += 64) compress(h, reinterpret_cast<const unsigned char*>(bytes.data() + i));
  unsigned char tail[128] = {};
  std::size_t rest = bytes.size() - full;
  for (std::size_t i = 0; i < rest; ++i) tail[i] = static_cast<unsigned char>(bytes[full + i]);
  tail[rest & 63] = 0x80;  // rest < 64; the mask tells the compiler so
  std::size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  std::uint64_t bits = std::uint64_t(bytes.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t i = 0; i < tail_len; i += 64) compress(h, tail + i);
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(40);
  for (auto word : h)
    for (int shift = 28; shift >= 0; shift -= 4) out += hex[(word >> shift) & 0xF];
  return out;
}

script::script(std::string source) {
  auto d = std::make_shared<data>();
  d->sha1 = sha1_hex(source);
  d->source = std::move(source);
  data_ = std::move(d);
}

}  // namespace dlock::redis
