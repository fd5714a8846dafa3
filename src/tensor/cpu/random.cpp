// CPU kernels drawing from Philox: fill_random, dropout_forward / dropout_backward.
// CUDA twin: src/tensor/cuda/random.cu. Both number values identically (src/tensor/philox.h).
#include "tensor/cpu/common.h"
#include "tensor/philox.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace saobp::cpu {

namespace {
// Philox blocks first .. first + kBlocks - 1 of (seed, stream), word k of block j in w[k][j]:
// philox::block for each, written across blocks (structure of arrays). Same values as
// philox::block (integer arithmetic: every path gives the same bits).
constexpr uint64_t kBlocks = 16;

#if defined(__AVX512F__)
// hi and lo 32 bits of a · m for 16 lanes: _mm512_mul_epu32 multiplies the even 32-bit lanes
// (the low halves of the 64-bit lanes); the odd ones are shifted down first.
inline void mulhilo16(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

// The same ten rounds as philox4x32_10 on 16 blocks per register (block by block, GCC left the
// 32x32 -> 64-bit products scalar: 2.8% of the BERT-Mini step).
void philox_blocks(uint64_t seed, uint64_t stream, uint64_t first, uint32_t (&w)[4][kBlocks]) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  // first + j for j < 16: the low word may wrap, then the high word carries.
  const __m512i lo0 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first)));
  __m512i c0 = _mm512_add_epi32(lo0, lane);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo0);
  const __m512i hi0 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first >> 32)));
  __m512i c1 = _mm512_mask_add_epi32(hi0, carry, hi0, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(stream)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(stream >> 32)));
  const __m512i m0 = _mm512_set1_epi64(philox::kM0), m1 = _mm512_set1_epi64(philox::kM1);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    __m512i h0, l0, h1, l1;
    mulhilo16(c0, m0, h0, l0);
    mulhilo16(c2, m1, h1, l1);
    const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), _mm512_set1_epi32(static_cast<int32_t>(k0)));
    const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), _mm512_set1_epi32(static_cast<int32_t>(k1)));
    c0 = n0, c1 = l1, c2 = n2, c3 = l0;
    k0 += philox::kW0;
    k1 += philox::kW1;
  }
  _mm512_storeu_si512(w[0], c0);
  _mm512_storeu_si512(w[1], c1);
  _mm512_storeu_si512(w[2], c2);
  _mm512_storeu_si512(w[3], c3);
}
#else
void philox_blocks(uint64_t seed, uint64_t stream, uint64_t first, uint32_t (&w)[4][kBlocks]) {
  for (uint64_t j = 0; j < kBlocks; ++j) {
    const philox::U4 b = philox::block(seed, stream, first + j);
    for (int k = 0; k < 4; ++k) w[k][j] = b.v[k];
  }
}
#endif
}  // namespace

// out: contiguous. Value i is U[a, b) from word offset+i, or N(a, b^2) from normal offset+i.
void fill_random(Tensor& out, RandomKind kind, double a, double b, const RngKey& key) {
  if (!out.is_contiguous()) fail("fill_random", "output {} must be contiguous", out.str());
  dispatch_float(out.dtype(), "fill_random", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    parallel_for(out.numel(), 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const uint64_t idx = key.offset + static_cast<uint64_t>(i);
        if (kind == RandomKind::uniform) {
          const double u = philox::to_unit_float(philox::word(key.seed, key.stream, idx));
          p[i] = static_cast<T>(a + (b - a) * u);
        } else {
          p[i] = static_cast<T>(a + b * philox::normal(key.seed, key.stream, idx));
        }
      }
    });
  });
}

// x, y: contiguous (same shape); mask: u8, same shape. Keep element i when U_i >= p.
void dropout_forward(const Tensor& x, double p, const RngKey& key, Tensor& y, Tensor& mask) {
  if (!(p >= 0.0 && p < 1.0)) fail("dropout", "probability {} must be in [0, 1)", p);
  check_shape(y, x.shape(), "dropout", "output");
  check_shape(mask, x.shape(), "dropout", "mask");
  check_dtype(mask, DType::u8, "dropout", "mask");
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    uint8_t* mp = mask.data<uint8_t>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    const float pf = static_cast<float>(p);
    // Chunks of whole Philox blocks in index space: one block (4 words) serves 4 elements, and
    // the blocks are generated kBlocks at a time (philox_blocks, vectorized).
    const uint64_t first = key.offset, n = static_cast<uint64_t>(x.numel());
    const uint64_t b0 = first >> 2, b1 = (first + n + 3) >> 2;
    const int64_t groups = static_cast<int64_t>((b1 - b0 + kBlocks - 1) / kBlocks);
    parallel_for(groups, 256, [&](int64_t s, int64_t e) {
      uint32_t w[4][kBlocks];
      for (int64_t grp = s; grp < e; ++grp) {
        const uint64_t blk0 = b0 + static_cast<uint64_t>(grp) * kBlocks;
        philox_blocks(key.seed, key.stream, blk0, w);
        // Index blk0·4 + e uses word e & 3 of block e >> 2: the words in index order first,
        // so that a group wholly inside [first, first + n) runs one loop that vectorizes.
        uint32_t u[kBlocks * 4];
        for (uint64_t e = 0; e < kBlocks * 4; ++e) u[e] = w[e & 3][e >> 2];
        const uint64_t idx0 = blk0 * 4;
        if (idx0 >= first && idx0 + kBlocks * 4 <= first + n) {
          const uint64_t i0 = idx0 - first;
          uint8_t* __restrict m = mp + i0;
          T* __restrict o = yp + i0;
          const T* __restrict in = xp + i0;
          for (uint64_t e = 0; e < kBlocks * 4; ++e) {
            const bool keep = philox::to_unit_float(u[e]) >= pf;
            m[e] = keep;
            o[e] = keep ? in[e] * scale : T(0);
          }
          continue;
        }
        for (uint64_t e = 0; e < kBlocks * 4; ++e) {
          const uint64_t idx = idx0 + e;
          if (idx < first || idx >= first + n) continue;
          const uint64_t i = idx - first;
          const bool keep = philox::to_unit_float(u[e]) >= pf;
          mp[i] = keep;
          yp[i] = keep ? xp[i] * scale : T(0);
        }
      }
    });
  });
}

// gx += gy * mask / (1 - p).
void dropout_backward(const Tensor& gy, const Tensor& mask, double p, Tensor& gx, bool accumulate) {
  check_shape(mask, gy.shape(), "dropout_backward", "mask");
  dispatch_float(gy.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    const uint8_t* m = mask.data<uint8_t>();
    T* out = gx.data<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    parallel_for(gy.numel(), 32768, [&](int64_t s, int64_t e) {
      if (accumulate)
        for (int64_t i = s; i < e; ++i) out[i] = m[i] ? out[i] + g[i] * scale : out[i];
      else
        for (int64_t i = s; i < e; ++i) out[i] = m[i] ? g[i] * scale : T(0);
    });
  });
}

}  // namespace saobp::cpu
