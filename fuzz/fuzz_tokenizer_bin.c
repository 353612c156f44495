/* llama2.c tokenizer.bin importer; an accepted vocabulary is stored as a
 * tokenizer section, parsed by the runtime and used to encode a text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/import/import.h"
#include "pmpd_impl/tokenizer/tokenizer.h"

static unsigned char fuzz_section_memory[(1u << 20) + 64];
static unsigned char fuzz_scratch[1u << 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pmpd_vocab v;
    pmpd_error err;
    pmpd_build_model b;
    pmpd_build_init(&b);
    if (pmpd_import_llama2c_tokenizer(data, size, 0, &v, &err) == PMPD_OK) {
        if (pmpd_build_add_vocab(&b, &v) == PMPD_OK && b.sections[0].size <= (1u << 20)) {
            pmpd_tokenizer tok;
            unsigned char *fuzz_section = fuzz_section_memory + (64 - (uintptr_t)fuzz_section_memory % 64) % 64;
            memcpy(fuzz_section, b.sections[0].data, (size_t)b.sections[0].size);
            /* bos and eos must lie inside the vocabulary, as the loader ensures. */
            if (pmpd_tokenizer_parse(&tok, fuzz_section, b.sections[0].size, 0, v.n_tokens, v.n_tokens > 1,
                                     v.n_tokens > 2 ? 2 : 0, &err) == PMPD_OK) {
                int32_t ids[64];
                size_t n;
                pmpd_arena scratch;
                pmpd_arena_init(&scratch, fuzz_scratch, sizeof fuzz_scratch);
                pmpd_tokenizer_encode(&tok, "Once upon a time \xe2\x98\x83", 19, PMPD_TOKENIZE_BOS | PMPD_TOKENIZE_EOS, ids, 64, &n,
                                      &scratch);
            } else {
                __builtin_trap(); /* the importer's output must always parse */
            }
        }
    } else if (err.message[0] == '\0') {
        __builtin_trap();
    }
    pmpd_vocab_free(&v);
    pmpd_build_free(&b);
    return 0;
}
