/* Firmware-style embedding: the single amalgamated header, the "none"
 * platform (no filesystem, no threads), the models linked in as const
 * arrays (generated at build time), and one static arena whose size the
 * planning calls check before anything runs.  No heap.
 *
 * Two runs, one after the other in the same arena, each greedy from
 * "Once upon a time" to 64 positions:
 *   1. stories260K in f32 with an f32 KV cache: the ids must equal
 *      llama2.c's (the plain path is exact);
 *   2. the full stack, made by `pmpd-convert --type anyprec --bits 2:4
 *      --pmpd-calibrate --kv-codebooks 2:8`: nested weights prefilled at
 *      the stored schedule's width, the learned scheduler choosing the
 *      decode widths after the prefill (its working memory from the same
 *      arena, given back), a product-quantized KV cache: the ids must
 *      equal pmpd-run's on the same container with the same settings.
 *
 * Build (what `make firmware-example` does):
 *   make amalgamation
 *   sh examples/firmware/embed-model.sh build/stories260K.pmpd firmware_float_blob > build/firmware/float_blob.c
 *   sh examples/firmware/embed-model.sh build/stories260K-full.pmpd firmware_full_blob > build/firmware/full_blob.c
 *   cc -std=c99 -DPMPD_PLATFORM_NONE=1 -Ibuild -Iexamples/firmware \
 *      examples/firmware/main.c build/firmware/float_blob.c build/firmware/full_blob.c -lm
 *
 * Each run prints its token ids (BOS, prompt, greedy continuation) on a
 * line starting "ids f32:" or "ids full:", then the text, then a line with
 * its arena figures.  Build it with the same -march as pmpd-run to compare
 * the full stack's ids: the nested kernels' SIMD and scalar paths round
 * differently. */
#define PMPD_IMPLEMENTATION
#include "pmpd.h"

#include <stdio.h>

#include "model_blob.h"

#define FIRMWARE_ARENA_BYTES (1u << 20)
#define FIRMWARE_CONTEXT 64
#define FIRMWARE_PROMPT "Once upon a time"

#if defined(__GNUC__)
static unsigned char firmware_arena[FIRMWARE_ARENA_BYTES] __attribute__((aligned(PMPD_ARENA_ALIGNMENT)));
#else
static unsigned char firmware_arena[FIRMWARE_ARENA_BYTES];
#endif

static int firmware_fail(const char *what, pmpd_status status, const pmpd_error *err)
{
    fprintf(stderr, "firmware: %s: %s%s%s\n", what, pmpd_strerror(status), err && err->message[0] ? ": " : "",
            err ? err->message : "");
    return 1;
}

/* Precision for a nested model: the stored static schedule (its prefill
 * width), then, after the prefill, the learned scheduler's decode widths. */
static pmpd_status firmware_precision(const pmpd_model *model, pmpd_session *session)
{
    pmpd_precision_schedule schedule;
    unsigned seed_bits, parent_bits;
    if (pmpd_model_anyprec_widths(model, &seed_bits, &parent_bits) != PMPD_OK)
        return PMPD_OK;
    if (pmpd_precision_schedule_from_model(model, &schedule, NULL) != PMPD_OK)
        pmpd_precision_schedule_uniform(&schedule, 0, 0);
    return pmpd_session_set_precision(session, &schedule);
}

static int firmware_run(const char *tag, const char *name, const unsigned char *blob, size_t size, uint32_t kv_type, int learned)
{
    pmpd_arena arena;
    pmpd_error err;
    pmpd_model *model;
    pmpd_session *session;
    pmpd_session_config config;
    size_t planned, n_prompt, i, before, learned_bytes = 0;
    int32_t ids[FIRMWARE_CONTEXT];
    unsigned decode_bits = 0;
    const float *logits;
    pmpd_sampler sampler;
    pmpd_sampler_config greedy = {0.0f, 0, 0.0f};
    pmpd_status st;

    pmpd_arena_init(&arena, firmware_arena, sizeof firmware_arena);
    st = pmpd_model_open_memory(blob, size, &arena, &model, &err);
    if (st != PMPD_OK)
        return firmware_fail("model", st, &err);

    pmpd_session_config_init(&config);
    config.context_length = FIRMWARE_CONTEXT;
    config.kv_type = kv_type;
    /* The plan counts from an aligned fill level; the model's bookkeeping may
     * have left the arena mid-block. */
    before = (arena.used + PMPD_ARENA_ALIGNMENT - 1) / PMPD_ARENA_ALIGNMENT * PMPD_ARENA_ALIGNMENT;
    if ((st = pmpd_session_plan(model, &config, &planned)) != PMPD_OK)
        return firmware_fail("plan", st, NULL);
    if (planned > pmpd_arena_remaining(&arena))
        return firmware_fail("the static arena is too small for the planned session", PMPD_ERR_OUT_OF_MEMORY, NULL);
    if ((st = pmpd_session_create(model, &config, &arena, &session)) != PMPD_OK)
        return firmware_fail("session", st, NULL);
    if (arena.used - before != planned)
        return firmware_fail("session used other than the planned bytes", PMPD_ERR_STATE, NULL);
    if ((st = pmpd_sampler_init(&sampler, &greedy, pmpd_model_get_info(model)->vocab_size, &arena)) != PMPD_OK)
        return firmware_fail("sampler", st, NULL);
    if ((st = firmware_precision(model, session)) != PMPD_OK)
        return firmware_fail("precision schedule", st, NULL);

    st = pmpd_tokenize(model, FIRMWARE_PROMPT, 1, 0, ids, FIRMWARE_CONTEXT, &n_prompt, &arena);
    if (st != PMPD_OK)
        return firmware_fail("tokenize", st, NULL);
    if ((st = pmpd_session_prefill(session, ids, n_prompt, &logits)) != PMPD_OK)
        return firmware_fail("prefill", st, NULL);
    if (learned) {
        /* The decision's working memory: the arena above the sampler,
         * restored afterwards (its high water counts it). */
        pmpd_arena_mark mark = pmpd_arena_save(&arena);
        size_t level = arena.used;
        st = pmpd_session_apply_learned_scheduler(session, NULL, 0, &arena);
        learned_bytes = arena.high_water - level;
        pmpd_arena_restore(&arena, mark);
        if (st != PMPD_OK)
            return firmware_fail("learned scheduler", st, NULL);
    }
    for (i = n_prompt; i < FIRMWARE_CONTEXT; i++) {
        if ((st = pmpd_sampler_sample(&sampler, logits, NULL, &ids[i])) != PMPD_OK)
            return firmware_fail("sample", st, NULL);
        if (i + 1 == FIRMWARE_CONTEXT)
            break;
        decode_bits += pmpd_session_decode_bits(session);
        if ((st = pmpd_session_decode(session, ids[i], &logits)) != PMPD_OK)
            return firmware_fail("decode", st, NULL);
    }
    printf("ids %s:", tag); /* the text may hold newlines: the ids line is tagged */
    for (i = 0; i < FIRMWARE_CONTEXT; i++)
        printf(" %d", (int)ids[i]);
    printf("\n");
    for (i = 1; i < FIRMWARE_CONTEXT; i++) {
        const char *piece;
        size_t length;
        if (pmpd_token_to_piece(model, ids[i - 1], ids[i], &piece, &length) == PMPD_OK)
            fwrite(piece, 1, length, stdout);
    }
    printf("\nfirmware: %s: %zu-byte model in flash; %zu arena bytes used of %u (model tables %zu, session %zu "
           "planned",
           name, size, arena.high_water, FIRMWARE_ARENA_BYTES, before, planned);
    if (learned)
        printf(", learned scheduler %zu; average decode width %.2f bits", learned_bytes,
               (double)decode_bits / (double)(FIRMWARE_CONTEXT - 1 - n_prompt));
    printf(")\n");
    pmpd_session_destroy(session);
    pmpd_model_close(model);
    return 0;
}

int main(void)
{
    if (firmware_run("f32", "f32 weights, f32 KV", firmware_float_blob, firmware_float_blob_size, PMPD_KV_F32, 0))
        return 1;
    return firmware_run("full", "nested 2:4 weights, learned scheduler, PQ KV", firmware_full_blob, firmware_full_blob_size,
                        PMPD_KV_PQ, 1);
}
