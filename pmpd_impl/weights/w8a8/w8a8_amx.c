/* W8A8 product with AMX-INT8 tiles: one TDPBSSD multiplies a 16 x 64 int8
 * tile of weight rows with a 64 x 16 tile of activations (16 tokens) into
 * 16 x 16 int32 sums, 16384 exact multiply-adds, eight times what a
 * VNNI instruction does in the same issue slots.  The weights are read
 * straight from their row-major layout (a tile row is 64 columns of one
 * weight row, the stride the padded row); the activations come in the
 * tile order that pmpd_w8a8_act_quantize writes (w8a8.h).  Both operands
 * are signed, so no offset needs taking back out.
 *
 * Blocking: 32 rows x 32 tokens with four accumulator tiles (0-3), two
 * weight tiles (4, 5) and two activation tiles (6, 7): each weight tile
 * serves two token tiles and each activation tile two row tiles.  A
 * block of fewer rows reloads the configuration with shorter tiles. */
#include <string.h>

#include "platform/platform.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AMX
#include <immintrin.h>

#define W8A8_AMX_ROWS 16   /* rows of a weight tile */
#define W8A8_AMX_TOKENS 16 /* tokens of an activation tile (PMPD_W8A8_TOKEN_GROUP) */

/* The LDTILECFG operand (palette 1). */
typedef struct w8a8_amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} w8a8_amx_config;

/* The first weight tile (4) and its accumulators (0, 1) hold `first`
 * rows, the second (5; accumulators 2, 3) `second`; tiles 6-7 the 16
 * column quads of a 64-column activation step.  Every row is 64 bytes. */
static void w8a8_amx_configure(unsigned first, unsigned second)
{
    w8a8_amx_config c;
    unsigned i;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (i = 0; i < 8; i++) {
        c.bytes_per_row[i] = 64;
        c.rows[i] = (uint8_t)(i >= 6 ? 16 : i == 2 || i == 3 || i == 5 ? second : first);
    }
    _tile_loadconfig(&c);
}

/* Writes the sums of accumulator `tile` (rows r0.., tokens t0..) to y. */
static void w8a8_amx_store(const pmpd_w8a8_matrix *m, const int32_t sums[W8A8_AMX_ROWS][W8A8_AMX_TOKENS],
                           size_t r0, size_t rows, size_t t0, size_t n_tokens, float *y, size_t ldy)
{
    size_t i, j, nt = n_tokens - t0 < W8A8_AMX_TOKENS ? n_tokens - t0 : W8A8_AMX_TOKENS;
    for (j = 0; j < nt; j++)
        for (i = 0; i < rows; i++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, sums[i][j]);
}

/* Rows [r0, r0 + rows) (rows <= 32) times tokens [t0, t0 + 32) (those below
 * n_tokens); two_rows and two_tokens say whether the second weight and
 * activation tiles are used, and are constants at every call. */
static inline __attribute__((always_inline)) void w8a8_amx_block(const pmpd_w8a8_matrix *m, const int8_t *act,
                                                                 size_t r0, size_t rows, size_t t0, size_t n_tokens,
                                                                 int two_rows, int two_tokens, float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    const int8_t *a = act + t0 * k; /* t0 is a multiple of 16: a group's start */
    int32_t sums[W8A8_AMX_ROWS][W8A8_AMX_TOKENS];
    size_t c, first = two_rows ? W8A8_AMX_ROWS : rows;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (c = 0; c < k; c += 64) {
        _tile_loadd(4, w + c, (long)k);
        _tile_loadd(6, a + c * W8A8_AMX_TOKENS, 64);
        _tile_dpbssd(0, 4, 6);
        if (two_tokens) {
            _tile_loadd(7, a + W8A8_AMX_TOKENS * k + c * W8A8_AMX_TOKENS, 64);
            _tile_dpbssd(1, 4, 7);
        }
        if (two_rows) {
            _tile_loadd(5, w + W8A8_AMX_ROWS * k + c, (long)k);
            _tile_dpbssd(2, 5, 6);
            if (two_tokens)
                _tile_dpbssd(3, 5, 7);
        }
    }
    _tile_stored(0, sums, 64);
    w8a8_amx_store(m, (const int32_t(*)[W8A8_AMX_TOKENS])sums, r0, first, t0, n_tokens, y, ldy);
    if (two_tokens) {
        _tile_stored(1, sums, 64);
        w8a8_amx_store(m, (const int32_t(*)[W8A8_AMX_TOKENS])sums, r0, first, t0 + W8A8_AMX_TOKENS, n_tokens, y,
                       ldy);
    }
    if (two_rows) {
        _tile_stored(2, sums, 64);
        w8a8_amx_store(m, (const int32_t(*)[W8A8_AMX_TOKENS])sums, r0 + W8A8_AMX_ROWS, rows - W8A8_AMX_ROWS, t0,
                       n_tokens, y, ldy);
        if (two_tokens) {
            _tile_stored(3, sums, 64);
            w8a8_amx_store(m, (const int32_t(*)[W8A8_AMX_TOKENS])sums, r0 + W8A8_AMX_ROWS, rows - W8A8_AMX_ROWS,
                           t0 + W8A8_AMX_TOKENS, n_tokens, y, ldy);
        }
    }
}

/* Rows [r0, r0 + rows) over every token, in blocks of 32 tokens. */
static void w8a8_amx_rows(const pmpd_w8a8_matrix *m, const int8_t *act, size_t n_tokens, size_t r0, size_t rows,
                          float *y, size_t ldy)
{
    size_t t0;
    for (t0 = 0; t0 < n_tokens; t0 += 2 * W8A8_AMX_TOKENS) {
        int two_tokens = n_tokens - t0 > W8A8_AMX_TOKENS;
        if (rows > W8A8_AMX_ROWS) {
            if (two_tokens)
                w8a8_amx_block(m, act, r0, rows, t0, n_tokens, 1, 1, y, ldy);
            else
                w8a8_amx_block(m, act, r0, rows, t0, n_tokens, 1, 0, y, ldy);
        } else if (two_tokens) {
            w8a8_amx_block(m, act, r0, rows, t0, n_tokens, 0, 1, y, ldy);
        } else {
            w8a8_amx_block(m, act, r0, rows, t0, n_tokens, 0, 0, y, ldy);
        }
    }
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const int8_t *a = (const int8_t *)act;
    size_t r0 = row_begin, whole = (row_end - row_begin) / (2 * W8A8_AMX_ROWS) * (2 * W8A8_AMX_ROWS);
    size_t tail = row_end - row_begin - whole, padded_tail = (tail + 3) / 4 * 4;
    /* Granted once per process, normally by the loader (w8a8_format.c). */
    (void)pmpd_platform_request_amx();
    if (whole) {
        w8a8_amx_configure(W8A8_AMX_ROWS, W8A8_AMX_ROWS);
        for (; r0 < row_begin + whole; r0 += 2 * W8A8_AMX_ROWS)
            w8a8_amx_rows(m, a, n_tokens, r0, 2 * W8A8_AMX_ROWS, y, ldy);
    }
    if (tail) {
        /* Rows past row_end up to a multiple of 4 exist (the padding rows
         * of the layout) and are computed but not stored; a tail beyond
         * 16 rows gives the second weight tile the remainder. */
        if (padded_tail > W8A8_AMX_ROWS)
            w8a8_amx_configure(W8A8_AMX_ROWS, (unsigned)(padded_tail - W8A8_AMX_ROWS));
        else
            w8a8_amx_configure((unsigned)padded_tail, (unsigned)padded_tail);
        w8a8_amx_rows(m, a, n_tokens, r0, tail, y, ldy);
    }
    _tile_release();
}

#undef W8A8_AMX_ROWS
#undef W8A8_AMX_TOKENS
#endif
