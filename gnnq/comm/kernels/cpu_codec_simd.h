/* One SIMD variant of the encoder's row kernels, included by cpu_codec.c once per instruction set with
   W (lanes of 32 bits: 8 or 16) and NAME (the suffix of its functions) defined, inside a region compiled
   for that instruction set. GCC / Clang vector extensions: the same source serves AVX2 (W = 8),
   AVX-512 (W = 16) and the compiler's baseline (W = 8, any target).

   Every result equals the scalar reference (cpu_codec.c: range_scalar, quantize_scalar) bit for bit:
   the same Philox words, the same IEEE fp32 operations per element (-ffp-contract=off), min/max taken
   as the same first-of-equal selections. */

#define T(x) CAT(x, NAME)

typedef uint32_t T(vu) __attribute__((vector_size(4 * W)));
typedef int32_t T(vi) __attribute__((vector_size(4 * W)));
typedef float T(vf) __attribute__((vector_size(4 * W)));
typedef uint64_t T(vq) __attribute__((vector_size(4 * W)));
typedef uint8_t T(vb) __attribute__((vector_size(W)));
/* 64 code bytes viewed as wider words, and what 64 codes pack to at 4, 2 and 1 bits. */
typedef uint16_t T(p16) __attribute__((vector_size(64)));
typedef uint32_t T(p32) __attribute__((vector_size(64)));
typedef uint64_t T(p64) __attribute__((vector_size(64)));
typedef uint8_t T(b32) __attribute__((vector_size(32)));
typedef uint8_t T(b16) __attribute__((vector_size(16)));
typedef uint8_t T(b8) __attribute__((vector_size(8)));

/* A row's Philox key schedule, broadcast to 64-bit lanes: the round keys (k0, k1) of each round, each computed
   from the round number (GCC 12 at -O3 miscomputed a running sum k0 += W0 here on the baseline target). */
static inline __attribute__((always_inline)) void T(keys)(uint32_t k0, uint32_t k1, T(vq) ks[2 * PHILOX_ROUNDS]) {
    for (int round = 0; round < PHILOX_ROUNDS; round++) {
        uint32_t a = k0 + (uint32_t)round * PHILOX_W0, b = k1 + (uint32_t)round * PHILOX_W1; /* mod 2^32 */
        ks[2 * round] = (T(vq)){0} + a, ks[2 * round + 1] = (T(vq)){0} + b;
    }
}

/* Philox4x32-7 of W counters (call0 + lane, r0, r1, 0): lanes 0-7 serve columns [64 g, 64 g + 64) with
   call0 = 8 g, lanes 8-15 (W = 16) the next 64 columns. The state is kept as 64-bit lanes, even calls in one
   vector and odd calls in another, so each 32x32 -> 64-bit product is one SIMD multiply of the lanes' low
   halves (pmuludq: MUL_EPU32, which cpu_codec.c defines per instruction set) whose low half is the product's
   low word and whose high half, shifted down, its high word. The high halves of the other words are garbage
   that the multiplies ignore; the words' low halves are interleaved back into 32-bit lanes at the end.
   N (1 or 2) independent batches W calls apart (8 W columns) are computed side by side: each round waits on
   the previous one's multiplies, so one batch alone is bound by latency, not by the multiplier's throughput. */
static inline __attribute__((always_inline)) void T(philox)(uint32_t call0, int n, uint32_t r0, uint32_t r1,
                                                            const T(vq) ks[2 * PHILOX_ROUNDS], T(vu) w[2][4]) {
    T(vq) c0[4], c1[4], c2[4], c3[4], p0, p1; /* [2 b + parity] */
    for (int b = 0; b < n; b++)
        for (int par = 0; par < 2; par++) {
            int k = 2 * b + par;
            uint64_t lanes[W / 2];
            for (int l = 0; l < W / 2; l++) lanes[l] = call0 + (uint32_t)(W * b + 2 * l + par);
            memcpy(&c0[k], lanes, sizeof lanes);
            c1[k] = (T(vq)){0} + r0, c2[k] = (T(vq)){0} + r1, c3[k] = (T(vq)){0};
        }
    for (int round = 0; round < PHILOX_ROUNDS; round++)
        for (int k = 0; k < 2 * n; k++) {
            p0 = (T(vq))MUL_EPU32(c0[k], (T(vq)){0} + PHILOX_M0);
            p1 = (T(vq))MUL_EPU32(c2[k], (T(vq)){0} + PHILOX_M1);
            c0[k] = (p1 >> 32) ^ c1[k] ^ ks[2 * round], c1[k] = p1;
            c2[k] = (p0 >> 32) ^ c3[k] ^ ks[2 * round + 1], c3[k] = p0;
        }
    const T(vq) low32 = (T(vq)){0} + 0xffffffffu;
    for (int b = 0; b < n; b++) {
        w[b][0] = (T(vu))((c0[2 * b] & low32) | (c0[2 * b + 1] << 32));
        w[b][1] = (T(vu))((c1[2 * b] & low32) | (c1[2 * b + 1] << 32));
        w[b][2] = (T(vu))((c2[2 * b] & low32) | (c2[2 * b + 1] << 32));
        w[b][3] = (T(vu))((c3[2 * b] & low32) | (c3[2 * b + 1] << 32));
    }
}

/* A row's running minima, maxima and sum, W lanes each: lane l of chain a takes elements i + a W + l (four
   independent chains), the last dim % W elements go to every lane. Lane by lane, min and max are what
   torch.aminmax gives except for NaN (such rows are not coded: see encode_block) and the sign of a zero (settled
   by first_equal), so any order of comparisons gives the same values. The sum only screens for NaN and inf: it is
   finite whenever the row is (a finite row whose sum overflows is checked exactly). */
static inline __attribute__((always_inline)) void T(row_range)(const float *x, int64_t dim, T(vf) *lo_out,
                                                               T(vf) *hi_out, T(vf) *sum_out) {
    T(vf) lo[4], hi[4], sum[4];
    int64_t i = 0;
    for (int a = 0; a < 4; a++) lo[a] = (T(vf)){0} + x[0], hi[a] = lo[a], sum[a] = (T(vf)){0};
    for (; i + 4 * W <= dim; i += 4 * W)
        for (int a = 0; a < 4; a++) {
            T(vf) v;
            memcpy(&v, x + i + a * W, sizeof v);
            lo[a] = VMIN(v, lo[a]), hi[a] = VMAX(v, hi[a]), sum[a] += v;
        }
    for (; i + W <= dim; i += W) {
        T(vf) v;
        memcpy(&v, x + i, sizeof v);
        lo[0] = VMIN(v, lo[0]), hi[0] = VMAX(v, hi[0]), sum[0] += v;
    }
    for (; i < dim; i++) {
        T(vf) v = (T(vf)){0} + x[i];
        lo[0] = VMIN(v, lo[0]), hi[0] = VMAX(v, hi[0]), sum[0] += v;
    }
    *lo_out = VMIN(VMIN(lo[0], lo[1]), VMIN(lo[2], lo[3]));
    *hi_out = VMAX(VMAX(hi[0], hi[1]), VMAX(hi[2], hi[3]));
    *sum_out = (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

/* W vectors v[0..W), row i's W partial results in v[i], folded into v[0], whose lane i is then row i's result:
   log2(W) rounds, each pairing vectors and keeping, per row, the OP of the two halves of its lanes. */
#define PAIR(OP, a, b, ...) OP(__builtin_shufflevector(a, b, __VA_ARGS__##_P), __builtin_shufflevector(a, b, __VA_ARGS__##_Q))
#if W == 16
#define R1_P 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define R1_Q 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define R2_P 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define R2_Q 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
#define R3_P 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29
#define R3_Q 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31
#define R4_P 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define R4_Q 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#define FOLD(OP, v)                                                                                                   \
    do {                                                                                                              \
        for (int k = 0; k < 8; k++) v[k] = PAIR(OP, v[2 * k], v[2 * k + 1], R1);                                      \
        for (int k = 0; k < 4; k++) v[k] = PAIR(OP, v[2 * k], v[2 * k + 1], R2);                                      \
        for (int k = 0; k < 2; k++) v[k] = PAIR(OP, v[2 * k], v[2 * k + 1], R3);                                      \
        v[0] = PAIR(OP, v[0], v[1], R4);                                                                              \
    } while (0)
#else
#define R1_P 0, 1, 2, 3, 8, 9, 10, 11
#define R1_Q 4, 5, 6, 7, 12, 13, 14, 15
#define R2_P 0, 1, 4, 5, 8, 9, 12, 13
#define R2_Q 2, 3, 6, 7, 10, 11, 14, 15
#define R3_P 0, 2, 4, 6, 8, 10, 12, 14
#define R3_Q 1, 3, 5, 7, 9, 11, 13, 15
#define FOLD(OP, v)                                                                                                   \
    do {                                                                                                              \
        for (int k = 0; k < 4; k++) v[k] = PAIR(OP, v[2 * k], v[2 * k + 1], R1);                                      \
        for (int k = 0; k < 2; k++) v[k] = PAIR(OP, v[2 * k], v[2 * k + 1], R2);                                      \
        v[0] = PAIR(OP, v[0], v[1], R3);                                                                              \
    } while (0)
#endif
#define ADD(a, b) ((a) + (b))

/* W codes of columns x[0..W) with draws from word w, 16-bit half h: floor((x - z) / d + u) clamped to
   [0, levels] (clamp, then truncation: the same for t >= 0). u = (2 u16 + 1) 2^-17 as (1 + u16 2^-16) -
   (1 - 2^-17): the first from its bits, the difference exact (Sterbenz). VMAX (t, 0) and VMIN (t, levels) are
   the scalar path's selections t > 0 ? t : 0 (NaN -> 0) and t < levels ? t : levels. */
static inline __attribute__((always_inline)) T(vb) T(codes)(const float *x, T(vu) w, int h, float z, float d,
                                                            float levels) {
    T(vu) one = (h ? (w >> 9) : (w << 7)) & 0x7fff80u; /* u16 in the mantissa's top 16 bits */
    T(vf) u = (T(vf))(one | 0x3f800000u) - (1.0f - 0x1p-17f), v;
    memcpy(&v, x, sizeof v);
    T(vf) t = (v - z) / d + u;
    t = VMIN(VMAX(t, (T(vf)){0}), (T(vf)){0} + levels);
    return __builtin_convertvector(__builtin_convertvector(t, T(vi)), T(vb));
}

/* 64 codes (bytes < 2^bits) into 64 * bits / 8 bytes, code j of a byte in bits [j * bits, (j + 1) * bits):
   shifts and ORs inside 16-, 32- or 64-bit words, then their low bytes. */
static inline __attribute__((always_inline)) void T(pack64)(const uint8_t *codes, int bits, uint8_t *out) {
    if (bits == 4) {
        T(p16) x;
        memcpy(&x, codes, 64);
        x |= x >> 4;
        T(b32) b = __builtin_convertvector(x, T(b32));
        memcpy(out, &b, 32);
    } else if (bits == 2) {
        T(p32) x;
        memcpy(&x, codes, 64);
        x |= x >> 6;
        x |= x >> 12;
        T(b16) b = __builtin_convertvector(x, T(b16));
        memcpy(out, &b, 16);
    } else {
        T(p64) x;
        memcpy(&x, codes, 64);
        x |= x >> 7;
        x |= x >> 14;
        x |= x >> 28;
        T(b8) b = __builtin_convertvector(x, T(b8));
        memcpy(out, &b, 8);
    }
}

/* The 8 W codes of columns [0, 8 W) of a full batch (one Philox call of W lanes) into codes[] (or, at 8 bits,
   straight to out). Chunk i: W consecutive columns from one word and half (W = 8), or from two words' lanes
   of one 64-column block (W = 16). */
static inline __attribute__((always_inline)) void T(batch)(const float *x, const T(vu) w[4], float z, float d,
                                                           float levels, uint8_t *codes) {
    T(vb) c[8];
#if W == 8
    for (int i = 0; i < 8; i++) c[i] = T(codes)(x + i * W, w[i & 3], i >> 2, z, d, levels);
#else
#define LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)
#define HI(a, b) __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31)
    c[0] = T(codes)(x, LO(w[0], w[1]), 0, z, d, levels);
    c[1] = T(codes)(x + 16, LO(w[2], w[3]), 0, z, d, levels);
    c[2] = T(codes)(x + 32, LO(w[0], w[1]), 1, z, d, levels);
    c[3] = T(codes)(x + 48, LO(w[2], w[3]), 1, z, d, levels);
    c[4] = T(codes)(x + 64, HI(w[0], w[1]), 0, z, d, levels);
    c[5] = T(codes)(x + 80, HI(w[2], w[3]), 0, z, d, levels);
    c[6] = T(codes)(x + 96, HI(w[0], w[1]), 1, z, d, levels);
    c[7] = T(codes)(x + 112, HI(w[2], w[3]), 1, z, d, levels);
#undef LO
#undef HI
#endif
    memcpy(codes, c, sizeof c);
}

/* The codes of the batch of columns [base, base + 8 W) into their bytes of out. */
static inline __attribute__((always_inline)) void T(emit)(const float *x, int64_t base, const int bits,
                                                          const T(vu) w[4], float z, float d, float levels,
                                                          uint8_t *codes, uint8_t *out) {
    uint8_t *o = out + base * bits / 8;
    T(batch)(x + base, w, z, d, levels, bits == 8 ? o : codes);
    if (bits != 8)
        for (int p = 0; p < 8 * W; p += 64) T(pack64)(codes + p, bits, o + p * bits / 8);
}

/* The codes of one row at a constant width (inlined per width, so the packing is straight-line): two
   batches of 8 W columns at a time, then one, then the last columns element by element. */
static inline __attribute__((always_inline)) void T(quantize_bits)(const float *x, int64_t dim, const int bits,
                                                                   float z, float d, uint32_t r0, uint32_t r1,
                                                                   uint32_t k0, uint32_t k1, uint8_t *out) {
    const float levels = (float)((1 << bits) - 1);
    uint8_t codes[8 * W] __attribute__((aligned(64)));
    int64_t base = 0;
    T(vu) w[2][4];
    T(vq) ks[2 * PHILOX_ROUNDS];
    T(keys)(k0, k1, ks);
    for (; base + 16 * W <= dim; base += 16 * W) { /* n constant in each call: the rounds unroll */
        T(philox)((uint32_t)(base >> 6) << 3, 2, r0, r1, ks, w);
        T(emit)(x, base, bits, w[0], z, d, levels, codes, out);
        T(emit)(x, base + 8 * W, bits, w[1], z, d, levels, codes, out);
    }
    if (base + 8 * W <= dim) {
        T(philox)((uint32_t)(base >> 6) << 3, 1, r0, r1, ks, w);
        T(emit)(x, base, bits, w[0], z, d, levels, codes, out);
        base += 8 * W;
    }
    if (base < dim) {
        T(philox)((uint32_t)(base >> 6) << 3, 1, r0, r1, ks, w);
        int64_t n = dim - base;
        for (int64_t jj = 0; jj < n; jj++) {
            uint32_t word = w[0][(jj >> 3) & 3][((jj >> 6) << 3) | (jj & 7)];
            codes[jj] = code_scalar(x[base + jj], word, (int)(jj >> 5) & 1, z, d, levels);
        }
        tail_pack(codes, n, bits, out + base * bits / 8);
    }
}

static void T(quantize)(const float *x, int64_t dim, int bits, float z, float d, uint32_t r0, uint32_t r1, uint32_t k0,
                        uint32_t k1, uint8_t *out) {
    switch (bits) {
    case 8: T(quantize_bits)(x, dim, 8, z, d, r0, r1, k0, k1, out); break;
    case 4: T(quantize_bits)(x, dim, 4, z, d, r0, r1, k0, k1, out); break;
    case 2: T(quantize_bits)(x, dim, 2, z, d, r0, r1, k0, k1, out); break;
    default: T(quantize_bits)(x, dim, 1, z, d, r0, r1, k0, k1, out);
    }
}

/* The ranges of rows [r0, r0 + n) (see T(row_range)), folded W rows to a vector, into each row's parameters
   (written to its wire row), z[i], d[i] and skip[i] (it holds NaN or inf: nothing written). */
static inline __attribute__((always_inline)) int64_t T(block_params)(const struct encode_job *j, int64_t r0, int64_t n,
                                                                     T(vf) *lo, T(vf) *hi, T(vf) *sum, float *z,
                                                                     float *d, int *skip) {
    float mn[MAX_BLOCK], mx[MAX_BLOCK], total[MAX_BLOCK];
    int64_t bad = 0;
    for (int64_t g = 0; g < n; g += W) {
        for (int64_t i = n; i < g + W; i++) lo[i] = lo[g], hi[i] = hi[g], sum[i] = sum[g];
        FOLD(VMIN, (lo + g));
        FOLD(VMAX, (hi + g));
        FOLD(ADD, (sum + g));
        memcpy(mn + g, &lo[g], sizeof lo[g]), memcpy(mx + g, &hi[g], sizeof hi[g]);
        memcpy(total + g, &sum[g], sizeof sum[g]);
    }
    for (int64_t i = 0; i < n; i++) {
        const float *x = job_row(j, r0 + i);
        skip[i] = total[i] - total[i] != 0 && nonfinite(x, j->dim);
        bad += skip[i];
        if (!skip[i])
            finish_params(x, j->dim, mn[i], mx[i], job_bits(j, r0 + i), j->fp16, job_out(j, r0 + i), PARAMS, &z[i],
                          &d[i]);
    }
    return bad;
}

/* A job's rows, one at a time (block 1) or a block at a time (see cpu_codec.c): while one block's rows are coded
   (read from L1), the next block's ranges are taken row for row between them, so its reads from memory overlap the
   coding; then that block's parameters. Returns how many rows hold NaN or inf. */
static int64_t T(encode_rows)(const struct encode_job *j, int64_t block) {
    const int64_t dim = j->dim;
    T(vf) lo[MAX_BLOCK], hi[MAX_BLOCK], sum[MAX_BLOCK];
    float z[MAX_BLOCK], d[MAX_BLOCK];
    int skip[MAX_BLOCK];
    int64_t bad = 0, n = j->last - j->first < block ? j->last - j->first : block;
    if (block == 1) { /* wide rows: each row's range, then its codes (from L1), the next row fetched meanwhile */
        for (int64_t r = j->first; r < j->last; r++) {
            const float *x = job_row(j, r);
            prefetch_row(j, r + 1);
            T(row_range)(x, dim, &lo[0], &hi[0], &sum[0]);
            T(vf) nz = sum[0] - sum[0];
            uint64_t lanes[W / 2], any = 0;
            memcpy(lanes, &nz, sizeof lanes);
            for (int k = 0; k < W / 2; k++) any |= lanes[k];
            if (any && nonfinite(x, dim)) {
                bad++;
                continue;
            }
            finish_params(x, dim, REDUCE_MIN(lo[0]), REDUCE_MAX(hi[0]), job_bits(j, r), j->fp16, job_out(j, r), PARAMS,
                          &z[0], &d[0]);
            uint64_t key = (uint64_t)j->keys[r], ridx = (uint64_t)j->ridx[r];
            T(quantize)(x, dim, job_bits(j, r), z[0], d[0], (uint32_t)ridx, (uint32_t)(ridx >> 32), (uint32_t)key,
                        (uint32_t)(key >> 32), job_out(j, r) + (j->fp16 ? 4 : 8));
        }
        return bad;
    }
    for (int64_t i = 0; i < n; i++) T(row_range)(job_row(j, j->first + i), dim, &lo[i], &hi[i], &sum[i]);
    bad += T(block_params)(j, j->first, n, lo, hi, sum, z, d, skip);
    for (int64_t r0 = j->first, r1, n1; r0 < j->last; r0 = r1, n = n1) {
        r1 = r0 + n, n1 = j->last - r1 < block ? j->last - r1 : block;
        for (int64_t i = 0; i < n || i < n1; i++) {
            if (i < n1) {
                prefetch_row(j, r1 + i + PREFETCH_ROWS);
                T(row_range)(job_row(j, r1 + i), dim, &lo[i], &hi[i], &sum[i]);
            }
            if (i < n && !skip[i]) {
                int64_t r = r0 + i;
                uint64_t key = (uint64_t)j->keys[r], ridx = (uint64_t)j->ridx[r];
                T(quantize)(job_row(j, r), dim, job_bits(j, r), z[i], d[i], (uint32_t)ridx, (uint32_t)(ridx >> 32),
                            (uint32_t)key, (uint32_t)(key >> 32), job_out(j, r) + (j->fp16 ? 4 : 8));
            }
        }
        if (n1) bad += T(block_params)(j, r1, n1, lo, hi, sum, z, d, skip);
    }
    return bad;
}

#undef ADD
#undef FOLD
#undef PAIR
#undef R1_P
#undef R1_Q
#undef R2_P
#undef R2_Q
#undef R3_P
#undef R3_Q
#undef R4_P
#undef R4_Q
#undef T
