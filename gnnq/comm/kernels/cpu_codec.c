/* Fused CPU codec: one pass over each row, bit-identical to torch_codec (see its docstring), with
the draws computed inline by Philox4x32-7 exactly as philox.py defines them.

Built by c_codec.py with -O3 -ffp-contract=off and without -ffast-math: every operation below
is the same IEEE fp32 operation, in the same order, that the torch path performs. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#if defined(GNNQ_AVX512) && !defined(GNNQ_AVX2)
#define GNNQ_AVX2 /* every AVX-512 CPU has AVX2 (and the AVX-512 path uses its F16C parameters) */
#endif
#if defined(GNNQ_AVX2)
#include <immintrin.h>
#endif

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

/* torch_codec.row_params for 16-bit parameters: fp16, or flagged bf16 where fp16 overflows. Instantiated with
   the portable fp16 conversions below and, in the AVX2 region, F16C's (the same round-to-nearest-even). */
#define PARAMS16(NAME, TO16, TO32)                                                                              \
    static void NAME(float mn, float mx, float levels, uint16_t *zw, uint16_t *sw, float *z, float *s) {        \
        uint16_t near = TO16(mn), zh = near, sh;                                                                \
        if (TO32(zh) > mn) zh = h16_down(zh);                                                                   \
        float zf = TO32(zh), step32 = (mx - zf) / levels;                                                       \
        sh = TO16(step32);                                                                                      \
        if (TO32(sh) < step32) sh = h16_up(sh);                                                                 \
        if (f16_finite(near) && f16_finite(zh) && f16_finite(sh)) {                                             \
            sh &= 0x7fff;                                                                                       \
            *zw = zh, *sw = sh, *z = zf, *s = TO32(sh);                                                         \
            return;                                                                                             \
        }                                                                                                       \
        zh = f32_to_bf16(mn);                                                                                   \
        if (bf16_to_f32(zh) > mn) zh = h16_down(zh);                                                            \
        zf = bf16_to_f32(zh), step32 = (mx - zf) / levels;                                                      \
        sh = f32_to_bf16(step32);                                                                               \
        if (bf16_to_f32(sh) < step32) sh = h16_up(sh);                                                          \
        sh &= 0x7fff;                                                                                           \
        *zw = zh, *sw = sh | STEP_FLAG, *z = zf, *s = bf16_to_f32(sh);                                          \
    }

PARAMS16(params16, f32_to_f16, f16_to_f32)

/* ---- The draws: Philox4x32-7 (Random123 constants, 7 rounds), as philox.py defines them ---- */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define PHILOX_ROUNDS 7 /* philox.ROUNDS */

/* The reference: one call, counter (c0, r0, r1, 0) under key (k0, k1). */
static void philox_scalar(uint32_t c0, uint32_t r0, uint32_t r1, uint32_t k0, uint32_t k1, uint32_t w[4]) {
    uint32_t c1 = r0, c2 = r1, c3 = 0;
    for (int round = 0; round < PHILOX_ROUNDS; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, c1 = (uint32_t)p1, c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, c3 = (uint32_t)p0;
        k0 += PHILOX_W0, k1 += PHILOX_W1;
    }
    w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}

/* One element's code from its Philox word and 16-bit half: u = (2 u16 + 1) 2^-17, t = (x - z) / d + u,
   clamped to [0, levels] (NaN -> 0, as torch's clamp + cast give), truncated (floor: t >= 0). */
static inline uint8_t code_scalar(float x, uint32_t word, int half, float z, float d, float levels) {
    float u = (float)(((word >> (16 * half)) & 0xffffu) * 2u + 1u) * 0x1p-17f;
    float t = (x - z) / d + u;
    t = t > 0 ? t : 0;
    t = t < levels ? t : levels;
    return (uint8_t)(int32_t)t;
}

/* torch.aminmax keeps the first of equal values, which decides the sign of a zero. */
static float first_equal(const float *x, int64_t dim, float v) {
    for (int64_t i = 0; i < dim; i++)
        if (x[i] == v) return x[i];
    return v;
}

static void pack_codes(const uint8_t *codes, int64_t nbytes, int bits, uint8_t *out) {
    int per_byte = 8 / bits;
    for (int64_t k = 0; k < nbytes; k++) {
        uint8_t byte = 0;
        for (int j = 0; j < per_byte; j++) byte |= (uint8_t)(codes[k * per_byte + j] << (j * bits));
        out[k] = byte;
    }
}

/* n codes (codes[] must have room up to the next multiple of 8) packed into ceil(n bits / 8) bytes. */
static void tail_pack(uint8_t *codes, int64_t n, int bits, uint8_t *out) {
    int64_t nbytes = (n * bits + 7) / 8;
    if (bits == 8) {
        memcpy(out, codes, (size_t)n);
        return;
    }
    for (int64_t i = n; i < nbytes * (8 / bits); i++) codes[i] = 0;
    pack_codes(codes, nbytes, bits, out);
}

/* ---- The scalar reference path ---- */

static int range_scalar(const float *x, int64_t dim, float *mn_out, float *mx_out) {
    float mn = x[0], mx = x[0];
    int bad = 0;
    for (int64_t i = 0; i < dim; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        bad |= x[i] - x[i] != 0; /* NaN or inf */
    }
    *mn_out = mn, *mx_out = mx;
    return bad;
}

/* Element by element, one Philox call per 8 columns (philox.py's mapping: column c from call
   ((c >> 6) << 3) | (c & 7), word (c >> 3) & 3, half (c >> 5) & 1), 64 columns at a time. */
static void quantize_scalar(const float *x, int64_t dim, int bits, float z, float d, uint32_t r0, uint32_t r1,
                            uint32_t k0, uint32_t k1, uint8_t *out) {
    const float levels = (float)((1 << bits) - 1);
    uint8_t codes[64];
    uint32_t w[8][4];
    for (int64_t base = 0; base < dim; base += 64) {
        for (int l = 0; l < 8; l++) philox_scalar((uint32_t)(base >> 6) << 3 | (uint32_t)l, r0, r1, k0, k1, w[l]);
        int64_t n = dim - base < 64 ? dim - base : 64;
        for (int64_t j = 0; j < n; j++) codes[j] = code_scalar(x[base + j], w[j & 7][(j >> 3) & 3], (int)(j >> 5), z, d, levels);
        tail_pack(codes, n, bits, out + base * bits / 8);
    }
}

/* ---- Rows in blocks ---- */

typedef void (*params_fn)(float, float, float, uint16_t *, uint16_t *, float *, float *);

/* A row's parameters from its range [mn, mx] (as torch.aminmax gives it: see first_equal), written at out; *z and *d
   (the step, 1 where it is 0) for its codes. */
static inline void finish_params(const float *x, int64_t dim, float mn, float mx, int bits, int fp16, uint8_t *out,
                                 params_fn params, float *z_out, float *d_out) {
    float levels = (float)((1 << bits) - 1), z, s;
    if (mn == 0.0f) mn = first_equal(x, dim, mn);
    if (mx == 0.0f) mx = first_equal(x, dim, mx);
    mn = mn < -LIMIT ? -LIMIT : mn > LIMIT ? LIMIT : mn;
    mx = mx < -LIMIT ? -LIMIT : mx > LIMIT ? LIMIT : mx;
    if (fp16) {
        uint16_t zw, sw;
        params(mn, mx, levels, &zw, &sw, &z, &s);
        memcpy(out, &zw, 2), memcpy(out + 2, &sw, 2);
    } else {
        z = mn, s = (mx - mn) / levels;
        memcpy(out, &z, 4), memcpy(out + 4, &s, 4);
    }
    *z_out = z, *d_out = s > 0 ? s : 1.0f;
}

/* Whether a row holds NaN or inf (exactly; the SIMD paths' cheaper test can only clear a row). */
static int nonfinite(const float *x, int64_t dim) {
    int bad = 0;
    for (int64_t i = 0; i < dim; i++) bad |= x[i] - x[i] != 0;
    return bad;
}

static int64_t row_bytes(int64_t dim, int bits, int fp16) { return (fp16 ? 4 : 8) + (dim * bits + 7) / 8; }

/* An encode's rows [first, last) (see gnnq_encode_simd), coded by ``rows`` (a block of rows at a time). */
struct encode_job;
typedef int64_t (*rows_fn)(const struct encode_job *, int64_t);
struct encode_job {
    const float *src;
    int64_t dim;
    const int64_t *row_idx, *keys, *ridx;
    int64_t first, last;
    const int8_t *bits;
    const int64_t *offsets;
    int uniform_bits, fp16;
    uint8_t *out;
    rows_fn rows;
    int64_t bad;
};

static inline const float *job_row(const struct encode_job *j, int64_t r) { return j->src + j->row_idx[r] * j->dim; }
static inline int job_bits(const struct encode_job *j, int64_t r) { return j->bits ? j->bits[r] : j->uniform_bits; }
static inline uint8_t *job_out(const struct encode_job *j, int64_t r) {
    return j->out + (j->offsets ? j->offsets[r] : r * row_bytes(j->dim, j->uniform_bits, j->fp16));
}

/* Row r's first 4 KiB, fetched while earlier rows are coded. always_inline: a function holding nothing but
   prefetches counts as pure to GCC, which then drops its calls (and the prefetches with them). */
static inline __attribute__((always_inline)) void prefetch_row(const struct encode_job *j, int64_t r) {
    if (r >= j->last) return;
    const float *x = job_row(j, r);
    int64_t ahead = j->dim < 1024 ? j->dim : 1024;
    for (int64_t k = 0; k < ahead; k += 64 / sizeof(float)) __builtin_prefetch(x + k);
}

/* Gathered rows of up to WIDE columns (the exchange's boundary rows) go in blocks of up to BLOCK_BYTES of fp32 input
   (at most MAX_BLOCK rows: 16 rows of 256 columns, 8 of 512). A row's codes wait on its parameters (its range's
   horizontal reductions, the fp16 roundings and a division: a chain of ~100 cycles), which row by row stalled every
   narrow row. In a block, the SIMD paths take the next block's ranges row for row between the current block's codes
   (each PREFETCH_ROWS ahead of its range prefetched), reduce them W rows to a vector (cpu_codec_simd.h: FOLD) and
   compute their parameters before that block's codes start, so no row waits. L1 holds the block being coded and
   the next one being ranged: 2 x 16 KiB of the 48 KiB of L1d a core on the CPUs measured. Wider rows amortise
   their chain, and rows in order stream through the hardware prefetchers: both measured faster one row at a time
   (each row's range, then its codes from L1, the next row prefetched). Measurements:
   results/quantized_messages/encoder_simd.md. */
#define BLOCK_BYTES (16 * 1024)
#define MAX_BLOCK 16
#define WIDE 512 /* columns: wider rows go one at a time */
#define PREFETCH_ROWS 4

/* The scalar reference: row by row. */
static int64_t encode_rows_scalar(const struct encode_job *j, int64_t block) {
    int64_t bad = 0;
    (void)block;
    for (int64_t r = j->first; r < j->last; r++) {
        const float *x = job_row(j, r);
        int b = job_bits(j, r);
        float mn, mx, z, d;
        prefetch_row(j, r + 1);
        if (range_scalar(x, j->dim, &mn, &mx)) {
            bad++;
            continue;
        }
        uint8_t *out = job_out(j, r);
        finish_params(x, j->dim, mn, mx, b, j->fp16, out, params16, &z, &d);
        uint64_t key = (uint64_t)j->keys[r], ridx = (uint64_t)j->ridx[r];
        quantize_scalar(x, j->dim, b, z, d, (uint32_t)ridx, (uint32_t)(ridx >> 32), (uint32_t)key,
                        (uint32_t)(key >> 32), out + (j->fp16 ? 4 : 8));
    }
    return bad;
}

/* ---- The SIMD variants (cpu_codec_simd.h), each compiled for its instruction set ---- */

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)

#define W 8
#define NAME generic
#define PARAMS params16
#define MUL_EPU32(a, b) (((a) & 0xffffffffu) * ((b) & 0xffffffffu))
#define VMIN(a, b) select_generic((a) < (b), a, b)
#define VMAX(a, b) select_generic((a) > (b), a, b)
#define REDUCE_MIN(v) reduce_generic((const float *)&(v), 0)
#define REDUCE_MAX(v) reduce_generic((const float *)&(v), 1)
typedef float vf_generic __attribute__((vector_size(32)));
typedef int32_t vi_generic __attribute__((vector_size(32)));
static inline vf_generic select_generic(vi_generic m, vf_generic a, vf_generic b) {
    return (vf_generic)((m & (vi_generic)a) | (~m & (vi_generic)b));
}
static float reduce_generic(const float *v, int max) {
    float r = v[0];
    for (int j = 1; j < 8; j++) r = max ? (v[j] > r ? v[j] : r) : (v[j] < r ? v[j] : r);
    return r;
}
#include "cpu_codec_simd.h"
#undef REDUCE_MIN
#undef REDUCE_MAX
#undef VMIN
#undef VMAX
#undef MUL_EPU32
#undef PARAMS
#undef NAME
#undef W

#if defined(GNNQ_AVX2)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif
static inline uint16_t f32_to_f16_f16c(float f) { return (uint16_t)_cvtss_sh(f, 0); } /* 0: to nearest even */
static inline float f16_to_f32_f16c(uint16_t h) { return _cvtsh_ss(h); }
PARAMS16(params16_f16c, f32_to_f16_f16c, f16_to_f32_f16c)
#define W 8
#define NAME avx2
#define PARAMS params16_f16c
#define MUL_EPU32(a, b) _mm256_mul_epu32((__m256i)(a), (__m256i)(b))
#define VMIN(a, b) ((vf_avx2)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define VMAX(a, b) ((vf_avx2)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define REDUCE_MIN(v) reduce_avx2((__m256)(v), 0)
#define REDUCE_MAX(v) reduce_avx2((__m256)(v), 1)
static inline float reduce_avx2(__m256 v, int max) {
    __m128 h = max ? _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
                   : _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 q = _mm_movehl_ps(h, h);
    h = max ? _mm_max_ps(h, q) : _mm_min_ps(h, q);
    q = _mm_shuffle_ps(h, h, 1);
    h = max ? _mm_max_ss(h, q) : _mm_min_ss(h, q);
    return _mm_cvtss_f32(h);
}
#include "cpu_codec_simd.h"
#undef REDUCE_MIN
#undef REDUCE_MAX
#undef VMIN
#undef VMAX
#undef MUL_EPU32
#undef PARAMS
#undef NAME
#undef W
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

#if defined(GNNQ_AVX512)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
#endif
#define W 16
#define NAME avx512
#define PARAMS params16_f16c
#define MUL_EPU32(a, b) _mm512_mul_epu32((__m512i)(a), (__m512i)(b))
#define VMIN(a, b) ((vf_avx512)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define VMAX(a, b) ((vf_avx512)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define REDUCE_MIN(v) _mm512_reduce_min_ps((__m512)(v))
#define REDUCE_MAX(v) _mm512_reduce_max_ps((__m512)(v))
#include "cpu_codec_simd.h"
#undef REDUCE_MIN
#undef REDUCE_MAX
#undef VMIN
#undef VMAX
#undef MUL_EPU32
#undef PARAMS
#undef NAME
#undef W
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

/* ---- Dispatch ---- */

enum { SIMD_AUTO = 0, SIMD_SCALAR = 1, SIMD_GENERIC = 2, SIMD_AVX2 = 3, SIMD_AVX512 = 4 };

/* Whether this build and this CPU can run a path. */
int gnnq_simd_supported(int level) {
    switch (level) {
    case SIMD_SCALAR:
    case SIMD_GENERIC: return 1;
#if defined(GNNQ_AVX2)
    case SIMD_AVX2: __builtin_cpu_init(); return __builtin_cpu_supports("avx2");
#endif
#if defined(GNNQ_AVX512)
    case SIMD_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
    default: return 0;
    }
}

/* The widest x86 path this build and CPU run, else the scalar one (on x86's baseline, SSE2, the generic vectors
   measured twice the scalar path's time: 64-byte vectors split into 16-byte registers). */
int gnnq_simd_best(void) {
    for (int level = SIMD_AVX512; level > SIMD_GENERIC; level--)
        if (gnnq_simd_supported(level)) return level;
    return SIMD_SCALAR;
}

/* Whether the job's rows are src's rows in order, one after the other. */
static int consecutive(const struct encode_job *j) {
    for (int64_t r = j->first + 1; r < j->last; r++)
        if (j->row_idx[r] != j->row_idx[r - 1] + 1) return 0;
    return 1;
}

static void *encode_rows(void *arg) {
    struct encode_job *j = arg;
    int64_t block = BLOCK_BYTES / (j->dim * (int64_t)sizeof(float));
    block = j->dim > WIDE || consecutive(j) ? 1 : block > MAX_BLOCK ? MAX_BLOCK : block;
    j->bad = j->first < j->last ? j->rows(j, block) : 0;
    return NULL;
}

#define MAX_THREADS 64

/* Rows src[row_idx[r]] into out, row r drawing on the stream keys[r] at index ridx[r]. Per-row widths
   and byte offsets when ``bits`` is given (mixed widths), else every row at ``uniform_bits``, packed
   back to back. ``simd``: 0 the widest path supported, else the path to take (1 scalar reference,
   2 generic vectors, 3 AVX2, 4 AVX-512); ``threads``: rows split in contiguous ranges over this many threads.
   Returns how many rows hold NaN or inf (-1: a thread could not start; -3: the path is not supported). */
int64_t gnnq_encode_simd(const float *src, int64_t dim, const int64_t *row_idx, const int64_t *keys, const int64_t *ridx,
                         int64_t rows, const int8_t *bits, const int64_t *offsets, int uniform_bits, int fp16,
                         uint8_t *out, int simd, int threads) {
    if (rows == 0 || dim == 0) return -2; /* the caller keeps these to the torch path */
    if (simd == SIMD_AUTO) simd = gnnq_simd_best();
    if (!gnnq_simd_supported(simd)) return -3;
    struct encode_job job = {src,    dim, row_idx, keys, ridx, 0, rows, bits, offsets, uniform_bits, fp16, out,
                             simd == SIMD_SCALAR ? encode_rows_scalar : encode_rows_generic, 0};
#if defined(GNNQ_AVX2)
    if (simd == SIMD_AVX2) job.rows = encode_rows_avx2;
#endif
#if defined(GNNQ_AVX512)
    if (simd == SIMD_AVX512) job.rows = encode_rows_avx512;
#endif
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > rows) threads = (int)rows;
    if (threads <= 1) {
        encode_rows(&job);
        return job.bad;
    }
    struct encode_job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    int64_t bad = 0, failed = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = job;
        jobs[t].first = rows * t / threads, jobs[t].last = rows * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&ids[t], NULL, encode_rows, &jobs[t]) == 0;
    encode_rows(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(ids[t], NULL);
        else
            encode_rows(&jobs[t]), failed++; /* no thread: this one does its share */
        bad += jobs[t].bad;
    }
    (void)failed;
    return bad + jobs[0].bad;
}

/* The widest path, one thread (the signature of earlier versions). */
int64_t gnnq_encode(const float *src, int64_t dim, const int64_t *row_idx, const int64_t *keys, const int64_t *ridx,
                    int64_t rows, const int8_t *bits, const int64_t *offsets, int uniform_bits, int fp16, uint8_t *out) {
    return gnnq_encode_simd(src, dim, row_idx, keys, ridx, rows, bits, offsets, uniform_bits, fp16, out, SIMD_AUTO, 1);
}

/* ---- Decoding ---- */

typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));

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
