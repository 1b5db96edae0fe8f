/* Fused CPU codec: one pass over each row, bit-identical to torch_codec (see its docstring), with
the draws computed inline by Philox4x32-10 exactly as philox.py defines them.

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

/* Round to nearest even, as torch's float -> bfloat16 conversion (finite input). */
static uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

static int f16_finite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

/* torch_codec._step_toward on the bit pattern (fp16 and bf16 alike: sign-magnitude). */
static uint16_t h16_up(uint16_t b) { return b == 0x8000 ? 1 : (b & 0x8000) ? b - 1 : b + 1; }
static uint16_t h16_down(uint16_t b) { return b == 0 ? 0x8001 : (b & 0x8000) ? b + 1 : b - 1; }

#define LIMIT 0x1p126f   /* rows' min and max are clamped to +-2^126 */
#define STEP_FLAG 0x8000 /* sign bit of the 16-bit step: bfloat16 parameters */

/* torch_codec.row_params for 16-bit parameters: fp16, or flagged bf16 where fp16 overflows. */
static void params16(float mn, float mx, float levels, uint16_t *zw, uint16_t *sw, float *z, float *s) {
    uint16_t near = f32_to_f16(mn), zh = near, sh;
    if (f16_to_f32(zh) > mn) zh = h16_down(zh);
    float zf = f16_to_f32(zh), step32 = (mx - zf) / levels;
    sh = f32_to_f16(step32);
    if (f16_to_f32(sh) < step32) sh = h16_up(sh);
    if (f16_finite(near) && f16_finite(zh) && f16_finite(sh)) {
        sh &= 0x7fff;
        *zw = zh, *sw = sh, *z = zf, *s = f16_to_f32(sh);
        return;
    }
    zh = f32_to_bf16(mn);
    if (bf16_to_f32(zh) > mn) zh = h16_down(zh);
    zf = bf16_to_f32(zh), step32 = (mx - zf) / levels;
    sh = f32_to_bf16(step32);
    if (bf16_to_f32(sh) < step32) sh = h16_up(sh);
    sh &= 0x7fff;
    *zw = zh, *sw = sh | STEP_FLAG, *z = zf, *s = bf16_to_f32(sh);
}

/* Philox4x32-10 (Random123 constants) of 8 counters ((g << 3) | lane, r0, r1, 0), as philox.py.
   Vector extensions (GCC, Clang): the 32x32->64-bit products of even and odd lanes are SIMD multiplies
   of zero-extended halves (pmuludq), recombined into the high and low words. */
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint64_t v4q __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) void mulhilo8(uint32_t m, v8u c, v8u *hi, v8u *lo) {
    const v4q low32 = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    v4q q = (v4q)c, even = (q & low32) * m, odd = (q >> 32) * m;
    *lo = (v8u)((even & low32) | (odd << 32));
    *hi = (v8u)((even >> 32) | (odd & ~low32));
}

static inline __attribute__((always_inline)) void philox8(uint32_t g, uint32_t r0, uint32_t r1, uint32_t k0, uint32_t k1,
                                                          v8u w[4]) {
    v8u c0 = {0, 1, 2, 3, 4, 5, 6, 7}, c1 = {0}, c2 = {0}, c3 = {0}, hi0, lo0, hi1, lo1;
    c0 |= g << 3, c1 += r0, c2 += r1;
    for (int round = 0; round < 10; round++) {
        mulhilo8(0xD2511F53u, c0, &hi0, &lo0);
        mulhilo8(0xCD9E8D57u, c2, &hi1, &lo1);
        c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}

/* The draws of columns [64 g, 64 g + 64) of one row: u[j] for column 64 g + j (philox.py's mapping). */
static inline __attribute__((always_inline)) void uniforms64(uint32_t g, uint32_t r0, uint32_t r1, uint32_t k0, uint32_t k1,
                                                             float u[64]) {
    v8u w[4];
    philox8(g, r0, r1, k0, k1, w);
    for (int h = 0; h < 2; h++)
        for (int wd = 0; wd < 4; wd++)
            for (int l = 0; l < 8; l++) u[h * 32 + wd * 8 + l] = (float)(((w[wd][l] >> (16 * h)) & 0xffffu) * 2u + 1u) * 0x1p-17f;
}

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

/* Encodes one row; returns 1 if it holds NaN or inf (its bytes are then meaningless), else 0. */
VARIANTS
static int encode_row(const float *x, int64_t dim, int bits, int fp16, uint64_t key, uint64_t ridx, uint8_t *out, uint8_t *codes) {
    float mn, mx, levels = (float)((1 << bits) - 1), z, s;
    /* Eight running minima, maxima and NaN detectors (x - x: NaN from NaN or inf, else 0), lane j taking
       elements i + j; as the scalar `x < lo ? x : lo` per lane, so the result is that of torch.aminmax. */
    v8f lo, hi, nz = {0};
    int64_t i = 0;
    for (int j = 0; j < 8; j++) lo[j] = hi[j] = x[0];
    for (; i + 8 <= dim; i += 8) {
        v8f v;
        memcpy(&v, x + i, sizeof v);
        v8i lt = v < lo, gt = v > hi;
        lo = (v8f)(((v8i)v & lt) | ((v8i)lo & ~lt));
        hi = (v8f)(((v8i)v & gt) | ((v8i)hi & ~gt));
        nz += v - v;
    }
    for (; i < dim; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
        nz[0] += x[i] - x[i];
    }
    mn = lo[0], mx = hi[0];
    int bad = nz[0] != nz[0];
    for (int j = 1; j < 8; j++) {
        mn = lo[j] < mn ? lo[j] : mn;
        mx = hi[j] > mx ? hi[j] : mx;
        bad |= nz[j] != nz[j];
    }
    if (bad) return 1;
    if (mn == 0.0f) mn = first_equal(x, dim, mn);
    if (mx == 0.0f) mx = first_equal(x, dim, mx);
    mn = mn < -LIMIT ? -LIMIT : mn > LIMIT ? LIMIT : mn;
    mx = mx < -LIMIT ? -LIMIT : mx > LIMIT ? LIMIT : mx;

    if (fp16) {
        uint16_t zw, sw;
        params16(mn, mx, levels, &zw, &sw, &z, &s);
        memcpy(out, &zw, 2), memcpy(out + 2, &sw, 2);
        out += 4;
    } else {
        z = mn, s = (mx - mn) / levels;
        memcpy(out, &z, 4), memcpy(out + 4, &s, 4);
        out += 8;
    }
    float d = s > 0 ? s : 1.0f, u[64];
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32), r0 = (uint32_t)ridx, r1 = (uint32_t)(ridx >> 32);
    for (int64_t base = 0; base < dim; base += 64) {
        uniforms64((uint32_t)(base >> 6), r0, r1, k0, k1, u);
        int64_t n = dim - base < 64 ? dim - base : 64;
        for (int64_t j = 0; j < n; j++) {
            float t = (x[base + j] - z) / d + u[j];
            t = t > 0 ? t : 0; /* NaN -> 0, as torch's clamp + cast give */
            t = t < levels ? t : levels;
            codes[base + j] = (uint8_t)(int32_t)t; /* truncation is floor here: t >= 0 */
        }
    }
    if (bits == 8) {
        memcpy(out, codes, (size_t)dim);
        return 0;
    }
    int64_t nbytes = (dim * bits + 7) / 8;
    for (i = dim; i < nbytes * (8 / bits); i++) codes[i] = 0;
    switch (bits) {
    case 4: pack_codes(codes, nbytes, 4, out); break;
    case 2: pack_codes(codes, nbytes, 2, out); break;
    default: pack_codes(codes, nbytes, 1, out);
    }
    return 0;
}

/* Inlined with a constant width. (float)code * s + z, two roundings (no FMA: -ffp-contract=off), as
   torch_codec. Below 8 bits, eight outputs at a time, so the stores are whole vectors: the group's
   ``bits`` bytes as one little-endian word, lane l taking its bits [l * bits, (l + 1) * bits). */
static inline __attribute__((always_inline)) void decode_codes(const uint8_t *in, int64_t dim, int bits, float s, float z, float *out) {
    int64_t i = 0;
    if (bits == 8) {
        for (; i < dim; i++) out[i] = (float)in[i] * s + z;
        return;
    }
    int per_byte = 8 / bits, mask = (1 << bits) - 1;
    v8u shift;
    for (int l = 0; l < 8; l++) shift[l] = (uint32_t)(l * bits);
    for (; i + 8 <= dim; i += 8) {
        const uint8_t *b = in + i / per_byte;
        uint32_t w = 0;
        for (int k = 0; k < bits; k++) w |= (uint32_t)b[k] << (8 * k);
        v8u codes = (((v8u){0} + w) >> shift) & (uint32_t)mask;
        v8f f = __builtin_convertvector((v8i)codes, v8f) * s + z;
        memcpy(out + i, &f, sizeof f);
    }
    for (; i < dim; i++) out[i] = (float)((in[i / per_byte] >> ((i % per_byte) * bits)) & mask) * s + z;
}

VARIANTS
static void decode_row(const uint8_t *in, int64_t dim, int bits, int fp16, float *out) {
    float z, s;
    if (fp16) {
        uint16_t zh, sh;
        memcpy(&zh, in, 2), memcpy(&sh, in + 2, 2);
        if (sh & STEP_FLAG)
            z = bf16_to_f32(zh), s = bf16_to_f32(sh & 0x7fff);
        else
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

/* Rows src[row_idx[r]] into out, row r drawing on the stream keys[r] at index ridx[r]. Per-row widths
   and byte offsets when ``bits`` is given (mixed widths), else every row at ``uniform_bits``, packed
   back to back. Returns how many rows hold NaN or inf (-1: out of memory). */
int64_t gnnq_encode(const float *src, int64_t dim, const int64_t *row_idx, const int64_t *keys, const int64_t *ridx,
                    int64_t rows, const int8_t *bits, const int64_t *offsets, int uniform_bits, int fp16, uint8_t *out) {
    if (rows == 0 || dim == 0) return -2; /* the caller keeps these to the torch path */
    uint8_t *codes = malloc((size_t)dim + 8);
    if (!codes) return -1;
    int64_t stride = row_bytes(dim, uniform_bits, fp16), bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        int b = bits ? bits[r] : uniform_bits;
        bad += encode_row(src + row_idx[r] * dim, dim, b, fp16, (uint64_t)keys[r], (uint64_t)ridx[r],
                          out + (offsets ? offsets[r] : r * stride), codes);
    }
    free(codes);
    return bad;
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
