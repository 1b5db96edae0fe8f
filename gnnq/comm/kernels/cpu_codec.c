/* Fused CPU codec: one pass over each row, bit-identical to torch_codec (see its docstring).

Built by c_codec.py with -O3 -ffp-contract=off and without -ffast-math: every operation below
is the same IEEE fp32 operation, in the same order, that the torch path performs. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* A second copy built for AVX2 (no FMA), picked at load time on CPUs that have it. */
#define VARIANTS __attribute__((target_clones("avx2", "default")))
#else
#define VARIANTS
#endif

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Round to nearest even, as torch's float -> half conversion. */
static uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00);
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
    if (ax < 0x38800000) {                                    /* below 2^-14: subnormal or zero */
        if (ax <= 0x33000000) return (uint16_t)sign;          /* <= 2^-25 rounds (ties to even) to 0 */
        uint32_t m = (ax & 0x7fffff) | 0x800000, shift = 126 - (ax >> 23);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        h += rem > half || (rem == half && (h & 1));
        return (uint16_t)(sign | h);
    }
    uint32_t h = (ax - 0x38000000) >> 13, rem = ax & 0x1fff;
    h += rem > 0x1000 || (rem == 0x1000 && (h & 1));
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000 | (m << 13));
    if (e) return bits_f32(sign | ((e + 112) << 23) | (m << 13));
    float v = (float)m * bits_f32(0x33800000); /* m * 2^-24, exact */
    return sign ? -v : v;
}

/* torch_codec._fp16_step_toward on the bit pattern. */
static uint16_t f16_up(uint16_t b) { return b == 0x8000 ? 1 : (b & 0x8000) ? b - 1 : b + 1; }
static uint16_t f16_down(uint16_t b) { return b == 0 ? 0x8001 : (b & 0x8000) ? b + 1 : b - 1; }

/* torch.aminmax keeps the first of equal values, which decides the sign of a zero. */
static float first_equal(const float *x, int64_t dim, float v) {
    for (int64_t i = 0; i < dim; i++)
        if (x[i] == v) return x[i];
    return v;
}

/* Inlined with a constant width, so the packing loop vectorizes. */
static inline __attribute__((always_inline)) void pack_codes(const uint8_t *codes, int64_t nbytes, int bits, uint8_t *out) {
    int per_byte = 8 / bits;
    for (int64_t k = 0; k < nbytes; k++) {
        uint8_t byte = 0;
        for (int j = 0; j < per_byte; j++) byte |= (uint8_t)(codes[k * per_byte + j] << (j * bits));
        out[k] = byte;
    }
}

VARIANTS
static void encode_row(const float *x, const float *u, int64_t dim, int bits, int fp16, uint8_t *out, uint8_t *codes) {
    float lo[8], hi[8], mn, mx, levels = (float)((1 << bits) - 1), z, s;
    int64_t i = 0;
    for (int j = 0; j < 8; j++) lo[j] = hi[j] = x[0];
    for (; i + 8 <= dim; i += 8)
        for (int j = 0; j < 8; j++) {
            lo[j] = x[i + j] < lo[j] ? x[i + j] : lo[j];
            hi[j] = x[i + j] > hi[j] ? x[i + j] : hi[j];
        }
    for (; i < dim; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
    }
    mn = lo[0], mx = hi[0];
    for (int j = 1; j < 8; j++) {
        mn = lo[j] < mn ? lo[j] : mn;
        mx = hi[j] > mx ? hi[j] : mx;
    }
    if (mn == 0.0f) mn = first_equal(x, dim, mn);
    if (mx == 0.0f) mx = first_equal(x, dim, mx);

    if (fp16) {
        uint16_t zh = f32_to_f16(mn), sh;
        if (f16_to_f32(zh) > mn) zh = f16_down(zh);
        z = f16_to_f32(zh);
        float step32 = (mx - z) / levels;
        sh = f32_to_f16(step32);
        if (f16_to_f32(sh) < step32) sh = f16_up(sh);
        s = f16_to_f32(sh);
        memcpy(out, &zh, 2), memcpy(out + 2, &sh, 2);
        out += 4;
    } else {
        z = mn, s = (mx - mn) / levels;
        memcpy(out, &z, 4), memcpy(out + 4, &s, 4);
        out += 8;
    }
    float d = s > 0 ? s : 1.0f;
    for (i = 0; i < dim; i++) {
        float t = (x[i] - z) / d + u[i];
        t = t > 0 ? t : 0; /* NaN -> 0, as torch's clamp + cast give */
        t = t < levels ? t : levels;
        codes[i] = (uint8_t)(int32_t)t; /* truncation is floor here: t >= 0 */
    }
    if (bits == 8) {
        memcpy(out, codes, (size_t)dim);
        return;
    }
    int64_t nbytes = (dim * bits + 7) / 8;
    for (i = dim; i < nbytes * (8 / bits); i++) codes[i] = 0;
    switch (bits) {
    case 4: pack_codes(codes, nbytes, 4, out); break;
    case 2: pack_codes(codes, nbytes, 2, out); break;
    default: pack_codes(codes, nbytes, 1, out);
    }
}

/* Inlined with a constant width, so the unpacking loop vectorizes. */
static inline __attribute__((always_inline)) void decode_codes(const uint8_t *in, int64_t dim, int bits, float s, float z, float *out) {
    int per_byte = 8 / bits, mask = (1 << bits) - 1;
    int64_t full = dim / per_byte;
    for (int64_t k = 0; k < full; k++)
        for (int j = 0; j < per_byte; j++) out[k * per_byte + j] = (float)((in[k] >> (j * bits)) & mask) * s + z;
    for (int64_t i = full * per_byte; i < dim; i++) out[i] = (float)((in[full] >> ((i - full * per_byte) * bits)) & mask) * s + z;
}

VARIANTS
static void decode_row(const uint8_t *in, int64_t dim, int bits, int fp16, float *out) {
    float z, s;
    if (fp16) {
        uint16_t zh, sh;
        memcpy(&zh, in, 2), memcpy(&sh, in + 2, 2);
        z = f16_to_f32(zh), s = f16_to_f32(sh);
        in += 4;
    } else {
        memcpy(&z, in, 4), memcpy(&s, in + 4, 4);
        in += 8;
    }
    switch (bits) {
    case 8: decode_codes(in, dim, 8, s, z, out); break;
    case 4: decode_codes(in, dim, 4, s, z, out); break;
    case 2: decode_codes(in, dim, 2, s, z, out); break;
    default: decode_codes(in, dim, 1, s, z, out);
    }
}

static int64_t row_bytes(int64_t dim, int bits, int fp16) { return (fp16 ? 4 : 8) + (dim * bits + 7) / 8; }

/* Rows src[row_idx[r]] with draws noise[r] into out. Per-row widths and byte offsets when
   ``bits`` is given (mixed widths), else every row at ``uniform_bits``, packed back to back. */
int gnnq_encode(const float *src, int64_t dim, const int64_t *row_idx, const float *noise, int64_t rows,
                const int8_t *bits, const int64_t *offsets, int uniform_bits, int fp16, uint8_t *out) {
    if (rows == 0 || dim == 0) return -2; /* the caller keeps these to the torch path */
    uint8_t *codes = malloc((size_t)dim + 8);
    if (!codes) return -1;
    int64_t stride = row_bytes(dim, uniform_bits, fp16);
    for (int64_t r = 0; r < rows; r++) {
        int b = bits ? bits[r] : uniform_bits;
        encode_row(src + row_idx[r] * dim, noise + r * dim, dim, b, fp16, out + (offsets ? offsets[r] : r * stride), codes);
    }
    free(codes);
    return 0;
}

/* Wire rows into out[out_rows[r]] (out[r] when out_rows is NULL); widths and offsets as above. */
int gnnq_decode(const uint8_t *wire, int64_t dim, int64_t rows, const int8_t *bits, const int64_t *offsets,
                int uniform_bits, int fp16, const int64_t *out_rows, float *out) {
    int64_t stride = row_bytes(dim, uniform_bits, fp16);
    for (int64_t r = 0; r < rows; r++) {
        int b = bits ? bits[r] : uniform_bits;
        decode_row(wire + (offsets ? offsets[r] : r * stride), dim, b, fp16, out + (out_rows ? out_rows[r] : r) * dim);
    }
    return 0;
}
