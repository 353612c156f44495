/* pmpd-run --chat's conversation loop, apart from the command line so a
 * test can drive it with scripted input: read a line, format it as a turn
 * of the chat template, prefill it after the history already in the
 * session's KV cache, stream the reply until EOS/EOT, repeat. */
#ifndef PMPD_EXAMPLES_CHAT_LOOP_H
#define PMPD_EXAMPLES_CHAT_LOOP_H

#include <stdio.h>

#include "examples/common/chat.h"
#include "pmpd.h"

typedef struct example_chat_config {
    example_chat_family family;
    const char *system;      /* system message of each conversation, or NULL */
    size_t max_reply;        /* tokens per reply at most */
    size_t context_length;   /* the session's positions */
    int prompt;              /* 1: write "> " before reading each line */
} example_chat_config;

typedef struct example_chat_stats {
    size_t replies;          /* replies ended (stop token, length cap or full context) */
    size_t resets;           /* /reset lines and resets after a full context */
    size_t context_full;     /* times the context filled */
} example_chat_stats;

/* Runs until EOF on in.  Lines: "/reset" empties the session (a new
 * conversation, the system message again); empty lines are skipped; any
 * other line is a user message.  Replies go to out (control tokens not
 * printed), one line each; notices to err.  When a turn or a reply does not
 * fit in the context the loop says so on err and starts a new conversation
 * (the turn is retried there once).  Returns PMPD_OK at EOF, else the first
 * failing call's status (reported on err). */
pmpd_status example_chat_loop(const pmpd_model *model, pmpd_session *session, pmpd_sampler *sampler,
                              pmpd_rng *rng, const example_chat_config *config, FILE *in, FILE *out, FILE *err,
                              pmpd_arena *scratch, example_chat_stats *stats);

#endif
