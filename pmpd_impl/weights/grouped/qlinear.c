#include "pmpd_impl/weights/grouped/qlinear.h"

static pmpd_qmatrix pmpd_qlinear_matrix(const pmpd_tensor *w)
{
    pmpd_qmatrix m;
    m.type = w->type;
    m.data = (const unsigned char *)w->data;
    m.rows = (size_t)w->dims[0];
    m.cols = (size_t)w->dims[1];
    return m;
}

/* The activations' view of scratch: the same arena layout every time, so
 * prepare and rows find the same arrays. */
static void pmpd_qlinear_view(void *scratch, size_t n_tokens, size_t cols, pmpd_qact *act)
{
    pmpd_arena arena;
    size_t bytes = 0;
    /* The planning call sized scratch with pmpd_qlinear_scratch_bytes, so
     * these cannot fail. */
    pmpd_qact_bytes(n_tokens, cols, &bytes);
    pmpd_arena_init(&arena, scratch, bytes);
    pmpd_qact_alloc(&arena, n_tokens, cols, act);
    act->n_tokens = n_tokens;
}

PMPD_INTERNAL pmpd_status pmpd_qlinear_scratch_bytes(size_t cols, size_t n_tokens, size_t *bytes)
{
    return pmpd_qact_bytes(n_tokens, cols, bytes);
}

PMPD_INTERNAL void pmpd_qlinear_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch,
                                        size_t begin, size_t end, unsigned worker)
{
    size_t cols = (size_t)w->dims[1];
    pmpd_qact act;
    (void)worker;
    pmpd_qlinear_view(scratch, n_tokens, cols, &act);
    if (end == n_tokens)
        end += n_tokens & 1; /* tokens are stored in pairs */
    pmpd_qact_quantize_tokens(&act, x, cols, cols, begin, end);
}

PMPD_INTERNAL void pmpd_qlinear_rows(const pmpd_tensor *w, const void *scratch, size_t n_tokens, float *y,
                                     size_t begin, size_t end)
{
    pmpd_qmatrix m = pmpd_qlinear_matrix(w);
    pmpd_qact act;
    pmpd_qlinear_view((void *)(uintptr_t)scratch, n_tokens, m.cols, &act);
    pmpd_qmatmul(&m, &act, begin, end, y, m.rows);
}

PMPD_INTERNAL void pmpd_qlinear_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_qmatrix m = pmpd_qlinear_matrix(w);
    pmpd_qformat_dequantize_row(&m, r, out);
}
