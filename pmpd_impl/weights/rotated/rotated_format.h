/*
 * One rotated format's row in the table of weight formats (format.h),
 * written once for nuq/, vq/ and tcq/: each row's functions only bind the
 * tensor's bytes and hand them to the format's own code, so the glue is
 * the same but for the prefix.  PMPD_ROTATED_FORMAT(P, TYPE, ACCESSOR,
 * REORDER) in a folder's P_format.c defines the row for a format that
 * gives
 *   pmpd_P_matrix, pmpd_P_bind (a tensor the loader accepted),
 *   pmpd_P_view (the checks at load), pmpd_P_rotated (its rotated input),
 *   pmpd_P_matmul (rows [begin, end) from the prepared input),
 *   pmpd_P_row (row r as floats);
 * the table calls ACCESSOR() for it.  The prepare step is the shared
 * rotation and int8 blocks (rotated.h), then REORDER(rotated, scratch,
 * begin, end) rearranges the prepared tokens for the format's kernels
 * (PMPD_ROTATED_KEEP_ORDER: as prepared).  Prefill loops each format's
 * GEMV over tiles of tokens: there is no separate GEMM entry.
 */
#ifndef PMPD_WEIGHTS_ROTATED_FORMAT_H
#define PMPD_WEIGHTS_ROTATED_FORMAT_H

#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/rotated/rotated.h"

#define PMPD_ROTATED_KEEP_ORDER(rotated, scratch, begin, end) ((void)0)

#define PMPD_ROTATED_FORMAT(P, TYPE, ACCESSOR, REORDER)                                                           \
    static pmpd_rotated pmpd_##P##_rotated_of(const pmpd_tensor *w)                                               \
    {                                                                                                             \
        pmpd_##P##_matrix m;                                                                                      \
        pmpd_##P##_bind(w->data, w->dims[0], w->dims[1], &m);                                                     \
        return pmpd_##P##_rotated(&m);                                                                            \
    }                                                                                                             \
                                                                                                                  \
    static void pmpd_##P##_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch,         \
                                   size_t begin, size_t end, unsigned worker)                                   \
    {                                                                                                             \
        const pmpd_rotated rotated = pmpd_##P##_rotated_of(w);                                                    \
        pmpd_rotated_prepare_scratch(&rotated, x, n_tokens, scratch, begin, end, worker);                         \
        REORDER(&rotated, scratch, begin, end);                                                                   \
    }                                                                                                             \
                                                                                                                  \
    static void pmpd_##P##_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens,      \
                                float *y, size_t begin, size_t end, unsigned bits)                               \
    {                                                                                                             \
        pmpd_##P##_matrix m;                                                                                      \
        (void)x;                                                                                                  \
        (void)bits;                                                                                               \
        pmpd_##P##_bind(w->data, w->dims[0], w->dims[1], &m);                                                     \
        pmpd_##P##_matmul(&m, scratch, n_tokens, begin, end, y, m.rows);                                          \
    }                                                                                                             \
                                                                                                                  \
    static int pmpd_##P##_shares(const pmpd_tensor *a, const pmpd_tensor *b)                                      \
    {                                                                                                             \
        return pmpd_rotated_shares(a, b, pmpd_##P##_rotated_of);                                                  \
    }                                                                                                             \
                                                                                                                  \
    /* The tensor's stored rotation size sets the prepared input's. */                                           \
    static pmpd_status pmpd_##P##_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads,            \
                                          size_t *bytes)                                                          \
    {                                                                                                             \
        return pmpd_rotated_scratch_bytes(pmpd_##P##_rotated_of(w).padded, n_tokens, n_threads, bytes);           \
    }                                                                                                             \
                                                                                                                  \
    static void pmpd_##P##_format_row(const pmpd_tensor *w, size_t r, float *out)                                \
    {                                                                                                             \
        pmpd_##P##_matrix m;                                                                                      \
        pmpd_##P##_bind(w->data, w->dims[0], w->dims[1], &m);                                                     \
        pmpd_##P##_row(&m, r, out);                                                                               \
    }                                                                                                             \
                                                                                                                  \
    static pmpd_status pmpd_##P##_check(const unsigned char *data, uint64_t size, uint32_t n_dims,              \
                                        const uint64_t *dims, uint64_t offset, const char *name,                 \
                                        uint32_t name_length, pmpd_error *err)                                   \
    {                                                                                                             \
        pmpd_##P##_matrix m;                                                                                      \
        pmpd_status status = pmpd_rotated_check_matrix(n_dims, offset, #P, name, name_length, err);              \
        if (status != PMPD_OK)                                                                                    \
            return status;                                                                                        \
        return pmpd_##P##_view(data, size, dims[0], dims[1], offset, &m, err);                                    \
    }                                                                                                             \
                                                                                                                  \
    static const pmpd_weight_format pmpd_##P##_format = {                                                         \
        TYPE, #P, NULL, pmpd_##P##_check, pmpd_##P##_scratch, NULL, pmpd_##P##_format_row,                       \
        NULL, pmpd_##P##_prepare, pmpd_##P##_rows, pmpd_##P##_shares,                                           \
    };                                                                                                            \
                                                                                                                  \
    PMPD_INTERNAL const pmpd_weight_format *ACCESSOR(void)                                                        \
    {                                                                                                             \
        return &pmpd_##P##_format;                                                                                \
    }

#endif
