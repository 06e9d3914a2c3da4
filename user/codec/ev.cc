#include "ev.hpp"

#include <bit>
#include <cerrno>

#include "bytes.hpp"

namespace mrc::codec {
namespace {

uint32_t width_max(uint32_t w) { return w >= 32 ? 0xffffffffu : (1u << w) - 1; }

// Reads `n` bits (n <= 32) of a big-endian bit string starting at bit `off`.
uint32_t get_bits(std::span<const uint8_t> s, uint32_t off, uint32_t n) {
  uint32_t v = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t b = off + i;
    uint32_t bit = b / 8 < s.size() ? (s[b / 8] >> (7 - b % 8)) & 1 : 0;
    v = v << 1 | bit;
  }
  return v;
}

// Writes the low `n` bits of v at bit `off`, most significant first.
void put_bits(uint8_t* s, size_t size, uint32_t off, uint32_t n, uint32_t v) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t b = off + i;
    if (b / 8 >= size) return;
    uint32_t bit = (n - 1 - i) < 32 ? (v >> (n - 1 - i)) & 1 : 0;
    if (bit) s[b / 8] |= uint8_t(1u << (7 - b % 8));
  }
}

// Deposits the low bits of x into the set bits of mask, lowest first (PDEP).
uint32_t deposit(uint32_t x, uint32_t mask) {
  uint32_t r = 0;
  for (uint32_t bit = 1; mask; bit <<= 1) {
    uint32_t low = mask & -mask;
    if (x & bit) r |= low;
    mask &= mask - 1;
  }
  return r;
}

}  // namespace

uint32_t ev_fmt_width(std::span<const EvFmtField> fmt) {
  uint32_t w = 0;
  for (auto f : fmt) w += f.width;
  return w;
}

int ev_validate(std::span<const EvFmtField> fmt, std::span<const EvField> fields,
                uint32_t max_width, std::string* why) {
  auto fail = [&](int err, std::string msg) {
    if (why) *why = std::move(msg);
    return err;
  };
  if (fields.size() > fmt.size())
    return fail(EINVAL, "field_count " + std::to_string(fields.size()) + " exceeds the format's " +
                            std::to_string(fmt.size()) + " fields");
  uint32_t fw = 0;
  for (auto f : fields) fw += f.width;
  const uint32_t total = ev_fmt_width(fmt);
  if (fw > total)
    return fail(EINVAL, "sum of field widths " + std::to_string(fw) + " exceeds the format width " +
                            std::to_string(total));
  for (size_t i = 0; i < fields.size(); i++) {
    const EvField& f = fields[i];
    const std::string at = "field " + std::to_string(i) + ": ";
    if (f.width == 0 || f.width > 32) return fail(EINVAL, at + "width must be 1..32");
    if (f.width > fmt[i].width)
      return fail(EINVAL, at + "width " + std::to_string(f.width) + " exceeds format field width " +
                              std::to_string(fmt[i].width));
    const uint32_t wm = width_max(f.width);
    if (f.init_val > wm) return fail(EINVAL, at + "init_val is wider than the field");
    if (f.mask & ~wm) return fail(EINVAL, at + "mask has bits outside the field width");
    if (f.mask == 0) continue;
    const uint32_t mm = width_max(uint32_t(std::popcount(f.mask)));
    if (f.max_val > mm) return fail(EINVAL, at + "max_val is wider than the mask's bit count");
    if (f.min_val > f.max_val) return fail(EINVAL, at + "min_val exceeds max_val");
  }
  if (total > max_width)
    return fail(E2BIG, "format width " + std::to_string(total) +
                           " exceeds the device's ev_max_width " + std::to_string(max_width));
  return 0;
}

uint32_t ev_compact_bits(std::span<const EvField> fields) {
  uint32_t n = 0;
  for (auto f : fields) n += uint32_t(std::popcount(f.mask));
  return n;
}

bool ev_expand(std::span<const EvFmtField> fmt, std::span<const EvField> fields,
               std::span<const uint8_t> compact, EvValue& out) {
  out.fill(0);
  uint32_t src = 0, dst = 0;
  for (size_t i = 0; i < fields.size() && i < fmt.size(); i++) {
    const EvField& f = fields[i];
    uint32_t v = f.init_val;
    if (f.mask) {
      uint32_t n = uint32_t(std::popcount(f.mask));
      uint32_t x = get_bits(compact, src, n);
      v = (v & ~f.mask) | deposit(x, f.mask);
      src += n;
    }
    put_bits(out.data(), out.size(), dst, fmt[i].width, v);
    dst += fmt[i].width;
  }
  for (uint32_t b = src; b < compact.size() * 8; b++)
    if ((compact[b / 8] >> (7 - b % 8)) & 1) return false;
  return true;
}

uint64_t ev_generate_space(std::span<const EvField> fields) {
  uint64_t n = 1;
  for (auto f : fields) {
    if (!f.mask) continue;
    n *= uint64_t(f.max_val) - f.min_val + 1;
    if (n > (1ull << 40)) return 1ull << 40;
  }
  return n;
}

EvValue ev_generate_compact(std::span<const EvField> fields, uint64_t index) {
  EvValue c{};
  uint64_t space = ev_generate_space(fields);
  index %= space;
  // Mixed radix, last field fastest.
  uint32_t digits[64] = {};
  size_t nf = fields.size() < 64 ? fields.size() : 64;
  for (size_t k = nf; k-- > 0;) {
    const EvField& f = fields[k];
    if (!f.mask) continue;
    uint64_t radix = uint64_t(f.max_val) - f.min_val + 1;
    digits[k] = uint32_t(f.min_val + index % radix);
    index /= radix;
  }
  uint32_t off = 0;
  for (size_t k = 0; k < nf; k++) {
    if (!fields[k].mask) continue;
    uint32_t n = uint32_t(std::popcount(fields[k].mask));
    put_bits(c.data(), c.size(), off, n, digits[k]);
    off += n;
  }
  return c;
}

uint32_t ev_to_u32(const EvValue& v, EvFmtMode mode) {
  return mode == EvFmtMode::kUdp ? load_be16(v.data()) : load_be32(v.data());
}

EvValue ev_from_u32(uint32_t ev, EvFmtMode mode) {
  EvValue v{};
  if (mode == EvFmtMode::kUdp)
    store_be16(v.data(), uint16_t(ev));
  else
    store_be32(v.data(), ev);
  return v;
}

void ev_apply(uint32_t ev, EvFmtMode mode, Ip& ip, Udp& udp) {
  udp.sport = uint16_t(ev);
  if (mode != EvFmtMode::kUdp && ip.src.ver == IpVersion::kV6) ip.flow_label = ev >> 16;
}

uint32_t ev_from_wire(const Ip& ip, const Udp& udp, EvFmtMode mode) {
  uint32_t ev = udp.sport;
  if (mode != EvFmtMode::kUdp && ip.src.ver == IpVersion::kV6) ev |= (ip.flow_label & 0xffff) << 16;
  return ev;
}

uint32_t ev_carried_mask(EvFmtMode mode, IpVersion ver) {
  return mode != EvFmtMode::kUdp && ver == IpVersion::kV6 ? 0xffffffffu : 0xffffu;
}

}  // namespace mrc::codec
