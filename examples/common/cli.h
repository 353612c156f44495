/* Option parsing and precision set-up shared by the command-line tools
 * (pmpd-run, pmpd-eval), so their options mean the same. */
#ifndef PMPD_EXAMPLES_CLI_H
#define PMPD_EXAMPLES_CLI_H

#include <stdint.h>

#include "pmpd.h"

/* A decimal integer >= min; returns 0 when text is not one. */
int example_parse_long(const char *text, long min, long *out);

/* --kv MODE: f32, f16, pq, int8 or int4 as a pmpd_kv_type; 0 when unknown. */
int example_parse_kv(const char *text, uint32_t *kv_type);

/* --bits P:D: prefill and decode widths, each 0..8 (0 = widest). */
int example_parse_bits(const char *text, unsigned *prefill_bits, unsigned *decode_bits);

/* Precision of a session of a nested (anyprec) model: the given schedule
 * (non-NULL), else --bits when given (either width non-zero), else the
 * model's static schedule, else the widest.  *parent_bits gets the model's
 * widest width (0: no nested weights, and nothing is set), *prefill_bits the
 * prefill width in force. */
pmpd_status example_precision_apply(const pmpd_model *model, pmpd_session *session, unsigned bits_p,
                                    unsigned bits_d, const pmpd_precision_schedule *given, unsigned *parent_bits,
                                    unsigned *prefill_bits);

#endif
