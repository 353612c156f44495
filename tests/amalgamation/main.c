/* Builds against the amalgamated build/pmpd.h alone: no other pmpd file is
 * on the include path.  With PMPD_OFFLINE=1 it also converts stories260K,
 * opens the container from memory as firmware would, and checks 32 greedy
 * tokens against llama2.c's (../shared/vectors); without the shared files
 * that part is skipped with a message. */
#define PMPD_IMPLEMENTATION
#include "pmpd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AMALG_TOKENS 32

static unsigned char amalg_small_buffer[4096];

static int amalg_check_arena(void)
{
    pmpd_arena arena;
    pmpd_error err;
    void *block = NULL;
    if (pmpd_arena_init(&arena, amalg_small_buffer, sizeof amalg_small_buffer) != PMPD_OK ||
        pmpd_arena_alloc(&arena, 100, 16, &block) != PMPD_OK || block == NULL ||
        pmpd_arena_alloc(&arena, sizeof amalg_small_buffer, 16, &block) != PMPD_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "amalgamation: arena misbehaves\n");
        return 1;
    }
    pmpd_error_clear(&err);
    if (err.code != PMPD_OK || strcmp(pmpd_strerror(PMPD_ERR_OUT_OF_MEMORY), "arena exhausted") != 0) {
        fprintf(stderr, "amalgamation: status strings misbehave\n");
        return 1;
    }
    return 0;
}

#if PMPD_OFFLINE
/* Reads llama2.c's greedy ids (BOS first). Returns how many were read. */
static int amalg_read_ids(const char *path, int32_t *ids, int max)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f)
        return 0;
    while (n < max && fscanf(f, "%d", &ids[n]) == 1)
        n++;
    fclose(f);
    return n;
}

static int amalg_generate(void)
{
    const char *models = "../shared/models", *out = "build/amalgamation-stories260K.pmpd";
    char in_path[256], tok_path[256];
    int32_t expected[AMALG_TOKENS + 1];
    pmpd_convert_options options;
    pmpd_error err;
    pmpd_arena arena;
    pmpd_model *model = NULL;
    pmpd_session *session = NULL;
    pmpd_session_config config;
    size_t planned = 0;
    unsigned char *memory;
    const float *logits = NULL;
    int32_t token;
    int i;
    snprintf(in_path, sizeof in_path, "%s/stories260K.bin", models);
    snprintf(tok_path, sizeof tok_path, "%s/tok512.bin", models);
    if (amalg_read_ids("../shared/vectors/stories260K_bos_greedy.ids", expected, AMALG_TOKENS + 1) !=
        AMALG_TOKENS + 1) {
        printf("amalgamation: ../shared not found, generation check skipped\n");
        return 0;
    }
    memset(&options, 0, sizeof options);
    options.tokenizer_path = tok_path;
    if (pmpd_convert_file(in_path, out, &options, NULL, &err) != PMPD_OK) {
        fprintf(stderr, "amalgamation: convert failed: %s\n", err.message);
        return 1;
    }
    memory = (unsigned char *)malloc((size_t)4 << 20);
    if (!memory || pmpd_arena_init(&arena, memory, (size_t)4 << 20) != PMPD_OK ||
        pmpd_model_open_file(out, &arena, &model, &err) != PMPD_OK) {
        fprintf(stderr, "amalgamation: open failed: %s\n", memory ? err.message : "no memory");
        free(memory);
        return 1;
    }
    pmpd_session_config_init(&config);
    config.context_length = 64;
    if (pmpd_session_plan(model, &config, &planned) != PMPD_OK ||
        pmpd_session_create(model, &config, &arena, &session) != PMPD_OK) {
        fprintf(stderr, "amalgamation: session failed\n");
        pmpd_model_close(model);
        free(memory);
        return 1;
    }
    token = expected[0];
    for (i = 1; i <= AMALG_TOKENS; i++) {
        int v, best = 0;
        if (pmpd_session_decode(session, token, &logits) != PMPD_OK)
            break;
        for (v = 1; v < (int)pmpd_model_get_info(model)->vocab_size; v++)
            if (logits[v] > logits[best])
                best = v;
        if (best != expected[i]) {
            fprintf(stderr, "amalgamation: token %d is %d, llama2.c gives %d\n", i, best, expected[i]);
            break;
        }
        token = best;
    }
    pmpd_session_destroy(session);
    pmpd_model_close(model);
    free(memory);
    if (i <= AMALG_TOKENS)
        return 1;
    printf("amalgamation: %d greedy tokens equal llama2.c's (session %zu bytes planned)\n", AMALG_TOKENS,
           planned);
    return 0;
}
#endif

int main(void)
{
    if (amalg_check_arena() != 0)
        return 1;
#if PMPD_OFFLINE
    if (amalg_generate() != 0)
        return 1;
#endif
    printf("amalgamation: ok (pmpd %s)\n", PMPD_VERSION_STRING);
    return 0;
}
