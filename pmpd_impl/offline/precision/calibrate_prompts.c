#include "pmpd_impl/offline/precision/calibrate_prompts.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/import/import.h"

PMPD_INTERNAL pmpd_status pmpd_calibration_sets_from_file(const pmpd_model *model, const char *path,
                                                          const pmpd_calibration_config *config,
                                                          pmpd_calibration_set sets[3], pmpd_error *err)
{
    const uint32_t length = config->prompt_length + 1;
    size_t size = 0, count[3] = {0, 0, 0}, line = 0, s, scratch_bytes;
    unsigned char *text = NULL;
    int32_t *tokens[3] = {NULL, NULL, NULL}, *ids = NULL;
    void *scratch_block = NULL;
    pmpd_arena scratch;
    char *cursor, *end;
    pmpd_status st = pmpd_import_read_file(path, &text, &size, err);
    memset(sets, 0, 3 * sizeof *sets);
    if (st == PMPD_OK) {
        unsigned char *grown = (unsigned char *)realloc(text, size + 1);
        text = grown ? grown : text;
        ids = (int32_t *)malloc((size + 3) * sizeof(int32_t));
        /* The tokenizer's working memory: 24 bytes per input byte (pmpd.h). */
        scratch_bytes = (size + 3) * 24 + 2 * PMPD_ARENA_ALIGNMENT;
        scratch_block = malloc(scratch_bytes);
        pmpd_arena_init(&scratch, scratch_block, scratch_bytes);
        for (s = 0; s < 3; s++)
            tokens[s] = (int32_t *)malloc((size / 2 + 1) * length * sizeof(int32_t));
        if (!grown || !ids || !scratch_block || !tokens[0] || !tokens[1] || !tokens[2])
            st = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    }
    for (cursor = (char *)text; st == PMPD_OK && cursor < (char *)text + size; cursor = end + 1) {
        size_t n = 0;
        end = memchr(cursor, '\n', (size_t)((char *)text + size - cursor));
        if (!end)
            end = (char *)text + size;
        *end = '\0';
        if (pmpd_tokenize(model, cursor, 1, 0, ids, size + 3, &n, &scratch) == PMPD_OK && n >= length) {
            s = line++ % 3;
            memcpy(tokens[s] + count[s]++ * length, ids, length * sizeof(int32_t));
        }
    }
    for (s = 0; s < 3 && st == PMPD_OK; s++) {
        if (!count[s])
            st = pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                "%s has fewer than 3 lines of at least %u tokens", path, (unsigned)length);
        else
            st = pmpd_calibration_set_from_prompts(model, tokens[s], (uint32_t)count[s], length,
                                                   config->output_length, &sets[s]);
    }
    for (s = 0; s < 3; s++)
        free(tokens[s]);
    free(ids);
    free(scratch_block);
    free(text);
    return st;
}
