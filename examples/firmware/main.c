/* Firmware-style embedding: the single amalgamated header, the "none"
 * platform (no filesystem, no threads), the model linked in as a const
 * array (generated at build time into model_blob.c), and one static arena
 * whose size the planning calls check before anything runs.  No heap.
 *
 * Build (what `make firmware-example` does):
 *   make amalgamation
 *   sh examples/firmware/embed-model.sh build/stories260K.pmpd > build/firmware/model_blob.c
 *   cc -std=c99 -DPMPD_PLATFORM_NONE=1 -Ibuild -Iexamples/firmware \
 *      examples/firmware/main.c build/firmware/model_blob.c -lm
 *
 * It prints the token ids (BOS, prompt, greedy continuation) on one line and
 * the text on the next, so a test can compare the ids with llama2.c's. */
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

int main(void)
{
    pmpd_arena arena;
    pmpd_error err;
    pmpd_model *model;
    pmpd_session *session;
    pmpd_session_config config;
    size_t planned, n_prompt, i, before;
    int32_t ids[FIRMWARE_CONTEXT];
    const float *logits;
    pmpd_sampler sampler;
    pmpd_sampler_config greedy = {0.0f, 0, 0.0f};
    pmpd_status st;

    pmpd_arena_init(&arena, firmware_arena, sizeof firmware_arena);
    st = pmpd_model_open_memory(firmware_model_blob, firmware_model_blob_size, &arena, &model, &err);
    if (st != PMPD_OK)
        return firmware_fail("model", st, &err);

    pmpd_session_config_init(&config);
    config.context_length = FIRMWARE_CONTEXT;
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

    st = pmpd_tokenize(model, FIRMWARE_PROMPT, 1, 0, ids, FIRMWARE_CONTEXT, &n_prompt, &arena);
    if (st != PMPD_OK)
        return firmware_fail("tokenize", st, NULL);
    if ((st = pmpd_session_prefill(session, ids, n_prompt, &logits)) != PMPD_OK)
        return firmware_fail("prefill", st, NULL);
    for (i = n_prompt; i < FIRMWARE_CONTEXT; i++) {
        if ((st = pmpd_sampler_sample(&sampler, logits, NULL, &ids[i])) != PMPD_OK)
            return firmware_fail("sample", st, NULL);
        if (i + 1 < FIRMWARE_CONTEXT && (st = pmpd_session_decode(session, ids[i], &logits)) != PMPD_OK)
            return firmware_fail("decode", st, NULL);
    }
    for (i = 0; i < FIRMWARE_CONTEXT; i++)
        printf("%s%d", i ? " " : "", (int)ids[i]);
    printf("\n");
    for (i = 1; i < FIRMWARE_CONTEXT; i++) {
        const char *piece;
        size_t length;
        if (pmpd_token_to_piece(model, ids[i - 1], ids[i], &piece, &length) == PMPD_OK)
            fwrite(piece, 1, length, stdout);
    }
    printf("\nfirmware: %zu arena bytes used of %u (session %zu planned)\n", arena.high_water,
           FIRMWARE_ARENA_BYTES, planned);
    pmpd_session_destroy(session);
    pmpd_model_close(model);
    return 0;
}
