/* BPE merges by llama2.c's run.c rule -- repeatedly merge the adjacent pair
 * whose merged piece has the highest score (above -1e10), the leftmost among
 * equal scores -- in O(n log n) instead of run.c's O(n^2) rescans. */
#ifndef PMPD_TOKENIZER_MERGE_H
#define PMPD_TOKENIZER_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"
#include "pmpd_impl/tokenizer/tokenizer.h"

/* Working memory per symbol: the pair ids, the two list links, the heap and
 * each symbol's place in it, as 32-bit words. */
#define PMPD_TOK_MERGE_BYTES_PER_SYMBOL (5u * 4u)

/* Largest symbol count: heap child indices (2i + 2) stay within 32 bits. */
#define PMPD_TOK_MERGE_MAX_SYMBOLS ((size_t)INT32_MAX)

/* Merges ids[0..n) in place and returns the new count.  work holds
 * n * PMPD_TOK_MERGE_BYTES_PER_SYMBOL bytes, 4-byte aligned;
 * n <= PMPD_TOK_MERGE_MAX_SYMBOLS. */
PMPD_INTERNAL size_t pmpd_tokenizer_merge(const pmpd_tokenizer *tok, int32_t *ids, size_t n, void *work);

#endif
