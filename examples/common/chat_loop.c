#include "examples/common/chat_loop.h"

#include <stdlib.h>
#include <string.h>

/* One line of in without its newline, malloc'ed; NULL at EOF. */
static char *chat_read_line(FILE *in)
{
    size_t size = 256, length = 0;
    char *line = (char *)malloc(size);
    if (!line)
        return NULL;
    while (fgets(line + length, (int)(size - length), in)) {
        length += strlen(line + length);
        if (length && line[length - 1] == '\n')
            break;
        if (length + 1 == size) {
            char *grown = (char *)realloc(line, size * 2);
            if (!grown)
                break;
            line = grown;
            size *= 2;
        }
    }
    if (!length) {
        free(line);
        return NULL;
    }
    while (length && (line[length - 1] == '\n' || line[length - 1] == '\r'))
        line[--length] = 0;
    return line;
}

static void chat_print_piece(const pmpd_model *model, int32_t prev, int32_t token, FILE *out)
{
    const char *piece;
    size_t length;
    if (pmpd_token_is_control(model, token) || pmpd_token_to_piece(model, prev, token, &piece, &length) != PMPD_OK)
        return;
    fwrite(piece, 1, length, out);
    fflush(out);
}

/* The turn's ids, malloc'ed (its text's bytes bound the count, plus the
 * BOS/EOS pieces). */
static pmpd_status chat_turn_ids(const pmpd_model *model, const example_chat_config *c, unsigned turn,
                                 const char *user, pmpd_arena *scratch, int32_t **ids, size_t *n)
{
    example_chat_piece pieces[EXAMPLE_CHAT_MAX_PIECES];
    pmpd_tokenizer_info info;
    size_t n_pieces = example_chat_turn_pieces(c->family, turn, c->system, user, pieces), i, bound = 4;
    pmpd_status st;
    int add_bos;
    if ((st = pmpd_model_get_tokenizer_info(model, &info)) != PMPD_OK)
        return st;
    for (i = 0; i < n_pieces; i++)
        bound += 2 + (pieces[i].text ? strlen(pieces[i].text) : 0);
    if (!(*ids = (int32_t *)malloc(bound * sizeof **ids)))
        return PMPD_ERR_OUT_OF_MEMORY;
    add_bos = turn == 0 && info.add_bos && !(n_pieces && pieces[0].kind == EXAMPLE_CHAT_BOS);
    st = example_chat_tokenize_turn(model, pieces, n_pieces, add_bos, *ids, bound, n, scratch);
    if (st != PMPD_OK) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

/* Streams one reply; *full is set when the context filled. */
static pmpd_status chat_reply(const pmpd_model *model, pmpd_session *session, pmpd_sampler *sampler, pmpd_rng *rng,
                              const example_chat_config *c, const float *logits, int32_t prev, FILE *out, int *full)
{
    pmpd_tokenizer_info info;
    size_t generated = 0;
    pmpd_status st = pmpd_model_get_tokenizer_info(model, &info);
    while (st == PMPD_OK && generated < c->max_reply) {
        int32_t next;
        if ((st = pmpd_sampler_sample(sampler, logits, rng, &next)) != PMPD_OK)
            break;
        /* The stop token is not fed back: the next turn's template text
         * closes the reply (and writes that token). */
        if (next == (int32_t)info.eos_id || next == info.eot_id || next == (int32_t)info.bos_id)
            break;
        chat_print_piece(model, prev, next, out);
        prev = next;
        generated++;
        if (pmpd_session_position(session) >= c->context_length) {
            *full = 1;
            break;
        }
        st = pmpd_session_decode(session, next, &logits);
    }
    fputc('\n', out);
    fflush(out);
    return st;
}

pmpd_status example_chat_loop(const pmpd_model *model, pmpd_session *session, pmpd_sampler *sampler,
                              pmpd_rng *rng, const example_chat_config *c, FILE *in, FILE *out, FILE *err,
                              pmpd_arena *scratch, example_chat_stats *stats)
{
    unsigned turn = 0;
    pmpd_status st = PMPD_OK;
    char *line;
    memset(stats, 0, sizeof *stats);
    for (;;) {
        int32_t *ids = NULL;
        size_t n = 0;
        const float *logits;
        int full = 0, retried = 0;
        if (c->prompt) {
            fputs("> ", out);
            fflush(out);
        }
        if (!(line = chat_read_line(in)))
            break;
        if (!strcmp(line, "/reset")) {
            st = pmpd_session_reset(session);
            turn = 0;
            stats->resets++;
            fprintf(err, "(new conversation)\n");
        } else if (line[0]) {
        again:
            st = chat_turn_ids(model, c, turn, line, scratch, &ids, &n);
            if (st == PMPD_OK && pmpd_session_position(session) + n >= c->context_length) {
                /* No room for the turn and one reply token. */
                free(ids);
                ids = NULL;
                stats->context_full++;
                if (retried || turn == 0) {
                    fprintf(err, "(the message needs %zu tokens: more than the context of %zu holds; skipped)\n",
                            n, c->context_length);
                } else {
                    fprintf(err, "(context full at %zu of %zu positions: new conversation)\n",
                            pmpd_session_position(session), c->context_length);
                    if ((st = pmpd_session_reset(session)) == PMPD_OK) {
                        turn = 0;
                        retried = 1;
                        stats->resets++;
                        goto again;
                    }
                }
            } else if (st == PMPD_OK && (st = pmpd_session_prefill(session, ids, n, &logits)) == PMPD_OK) {
                st = chat_reply(model, session, sampler, rng, c, logits, ids[n - 1], out, &full);
                stats->replies++;
                turn++;
                if (st == PMPD_OK && full) {
                    stats->context_full++;
                    stats->resets++;
                    fprintf(err, "(context full at %zu positions: new conversation)\n", c->context_length);
                    st = pmpd_session_reset(session);
                    turn = 0;
                }
            }
            free(ids);
        }
        free(line);
        if (st != PMPD_OK) {
            fprintf(err, "chat: %s\n", pmpd_strerror(st));
            return st;
        }
    }
    return PMPD_OK;
}
