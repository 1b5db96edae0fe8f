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

/* The row's min and max (as torch.aminmax: see first_equal) and whether it holds NaN or inf: 4 W running
   minima, maxima and NaN detectors (x - x: NaN from NaN or inf, else 0; four independent chains), lane j of
   chain a taking elements i + a W + j. VMIN / VMAX (per instruction set: minps / maxps) may differ from the
   scalar selections only on NaN (such rows are not coded) and on the sign of a zero (settled by first_equal),
   so any order of comparisons gives the same min and max values. */
static int T(range)(const float *x, int64_t dim, float *mn_out, float *mx_out) {
    T(vf) lo[4], hi[4], nz[4];
    int64_t i = 0;
    for (int a = 0; a < 4; a++) lo[a] = (T(vf)){0} + x[0], hi[a] = lo[a], nz[a] = (T(vf)){0};
    for (; i + 4 * W <= dim; i += 4 * W)
        for (int a = 0; a < 4; a++) {
            T(vf) v;
            memcpy(&v, x + i + a * W, sizeof v);
            lo[a] = VMIN(v, lo[a]), hi[a] = VMAX(v, hi[a]), nz[a] += v - v;
        }
    for (; i + W <= dim; i += W) {
        T(vf) v;
        memcpy(&v, x + i, sizeof v);
        lo[0] = VMIN(v, lo[0]), hi[0] = VMAX(v, hi[0]), nz[0] += v - v;
    }
    lo[0] = VMIN(VMIN(lo[0], lo[1]), VMIN(lo[2], lo[3]));
    hi[0] = VMAX(VMAX(hi[0], hi[1]), VMAX(hi[2], hi[3]));
    nz[0] = (nz[0] + nz[1]) + (nz[2] + nz[3]);
    float mn = REDUCE_MIN(lo[0]), mx = REDUCE_MAX(hi[0]);
    T(vi) nan = nz[0] != nz[0];
    uint64_t lanes[W / 2], any = 0;
    memcpy(lanes, &nan, sizeof lanes);
    for (int j = 0; j < W / 2; j++) any |= lanes[j];
    int bad = any != 0;
    for (; i < dim; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        bad |= x[i] - x[i] != 0;
    }
    *mn_out = mn, *mx_out = mx;
    return bad;
}

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

#undef T
