/* Importers: stories260K.gguf against stories260K.bin + tok512.bin, and
 * GGUF files with F16 / Q8_0 / Q4_0 tensors written by the tests' own GGUF
 * writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_gguf.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static unsigned char arena_a[64 * 1024], arena_b[64 * 1024], scratch_memory[64 * 1024];

static void test_gguf_equals_llama2c(void **state)
{
    static const char *const texts[] = {
        "Once upon a time", "Lily and Ben went to the park. They saw a big dog!", "",
        "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80 <0x41> <s> </s>", "  leading and trailing  ",
    };
    pmpd_build_model bin, gguf;
    test_container cb, cg;
    pmpd_arena a, b, scratch;
    pmpd_model *mb, *mg;
    uint32_t i;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &bin), PMPD_OK);
    assert_int_equal(test_import_shared("models/stories260K.gguf", NULL, &gguf), PMPD_OK);
    /* Same hyperparameters, except the context length the GGUF file declares. */
    assert_int_equal(gguf.info.seq_len, 2048);
    gguf.info.seq_len = bin.info.seq_len;
    assert_memory_equal(&gguf.info, &bin.info, sizeof bin.info);
    /* The same tensors, bit for bit, Q and K included (no row permutation). */
    assert_int_equal(gguf.n_tensors, bin.n_tensors);
    for (i = 0; i < bin.n_tensors; i++) {
        const pmpd_build_tensor *t = pmpd_build_find(&gguf, bin.tensors[i].name);
        assert_non_null(t);
        assert_int_equal(t->n_dims, bin.tensors[i].n_dims);
        assert_memory_equal(t->dims, bin.tensors[i].dims, sizeof t->dims);
        assert_int_equal(t->size, bin.tensors[i].size);
        assert_memory_equal(t->data, bin.tensors[i].data, (size_t)t->size);
    }
    /* Both tokenizers encode the same ids. */
    assert_int_equal(test_serialize(&bin, &cb), PMPD_OK);
    assert_int_equal(test_serialize(&gguf, &cg), PMPD_OK);
    pmpd_arena_init(&a, arena_a, sizeof arena_a);
    pmpd_arena_init(&b, arena_b, sizeof arena_b);
    pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
    assert_int_equal(pmpd_model_open_memory(cb.data, cb.size, &a, &mb, NULL), PMPD_OK);
    assert_int_equal(pmpd_model_open_memory(cg.data, cg.size, &b, &mg, NULL), PMPD_OK);
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t ids_b[128], ids_g[128];
        size_t nb, ng;
        assert_int_equal(pmpd_tokenize(mb, texts[i], 1, 1, ids_b, 128, &nb, &scratch), PMPD_OK);
        assert_int_equal(pmpd_tokenize(mg, texts[i], 1, 1, ids_g, 128, &ng, &scratch), PMPD_OK);
        assert_int_equal(nb, ng);
        assert_memory_equal(ids_b, ids_g, nb * sizeof *ids_b);
    }
    /* Every piece decodes alike except BOS and EOS, which tok512.bin spells "\n<s>\n" and "\n</s>\n". */
    for (i = 3; i < 512; i++) {
        const char *pb, *pg;
        size_t lb, lg;
        assert_int_equal(pmpd_token_to_piece(mb, 5, (int32_t)i, &pb, &lb), PMPD_OK);
        assert_int_equal(pmpd_token_to_piece(mg, 5, (int32_t)i, &pg, &lg), PMPD_OK);
        assert_int_equal(lb, lg);
        assert_memory_equal(pb, pg, lb);
    }
    test_container_free(&cb);
    test_container_free(&cg);
    pmpd_build_free(&bin);
    pmpd_build_free(&gguf);
}

static uint32_t mixed_types(const pmpd_build_tensor *t)
{
    if (t->n_dims == 1)
        return TEST_GGML_F32;
    if (strstr(t->name, "ffn_down"))
        return TEST_GGML_F16; /* rows of 172: not whole blocks of 32 */
    if (strstr(t->name, "ffn_gate") || strstr(t->name, "ffn_up") || strstr(t->name, "attn_output"))
        return TEST_GGML_Q4_0;
    return TEST_GGML_Q8_0;
}

static void test_gguf_f16_q8_q4_dequantized(void **state)
{
    pmpd_build_model ref, imported;
    unsigned char *gguf;
    size_t size;
    pmpd_error err;
    uint32_t i;
    uint64_t j;
    int seen[3] = {0, 0, 0};
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &ref), PMPD_OK);
    gguf = test_gguf_write(&ref, mixed_types, &size);
    assert_non_null(gguf);
    pmpd_build_init(&imported);
    assert_int_equal(pmpd_import_gguf(gguf, size, &imported, &err), PMPD_OK);
    assert_int_equal(imported.n_tensors, ref.n_tensors);
    assert_int_equal(imported.info.shared_classifier, 1);
    for (i = 0; i < ref.n_tensors; i++) {
        const pmpd_build_tensor *r = &ref.tensors[i], *t = pmpd_build_find(&imported, r->name);
        uint32_t type = mixed_types(r);
        assert_non_null(t);
        assert_int_equal(t->type, PMPD_TENSOR_F32);
        assert_memory_equal(t->dims, r->dims, sizeof t->dims);
        for (j = 0; j < r->size / 4; j++) {
            float got;
            memcpy(&got, t->data + 4 * j, 4);
            assert_true(got == test_gguf_expected(r, type, j));
        }
        seen[type == TEST_GGML_F16 ? 0 : type == TEST_GGML_Q8_0 ? 1 : type == TEST_GGML_Q4_0 ? 2 : 0]++;
    }
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    /* The quantized model still converts into a valid container. */
    {
        test_container c;
        pmpd_arena a;
        pmpd_model *m;
        assert_int_equal(test_serialize(&imported, &c), PMPD_OK);
        pmpd_arena_init(&a, arena_a, sizeof arena_a);
        assert_int_equal(pmpd_model_open_memory(c.data, c.size, &a, &m, &err), PMPD_OK);
        assert_int_equal(m->tokenizer.n_tokens, 512);
        test_container_free(&c);
    }
    free(gguf);
    pmpd_build_free(&ref);
    pmpd_build_free(&imported);
}

static void test_gguf_separate_classifier_kept(void **state)
{
    pmpd_build_model ref, imported;
    pmpd_build_tensor *emb;
    unsigned char *gguf, *copy;
    size_t size;
    uint64_t dims[2];
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &ref), PMPD_OK);
    emb = pmpd_build_find(&ref, "token_embd.weight");
    dims[0] = emb->dims[0];
    dims[1] = emb->dims[1];
    /* A classifier that differs from the embedding in one bit stays separate. */
    copy = (unsigned char *)malloc((size_t)emb->size);
    memcpy(copy, emb->data, (size_t)emb->size);
    copy[5] ^= 1;
    assert_int_equal(pmpd_build_add_tensor(&ref, "output.weight", PMPD_TENSOR_F32, 2, dims, copy, emb->size), PMPD_OK);
    free(copy);
    gguf = test_gguf_write(&ref, NULL, &size);
    pmpd_build_init(&imported);
    assert_int_equal(pmpd_import_gguf(gguf, size, &imported, NULL), PMPD_OK);
    assert_int_equal(imported.info.shared_classifier, 0);
    assert_non_null(pmpd_build_find(&imported, "output.weight"));
    free(gguf);
    pmpd_build_free(&ref);
    pmpd_build_free(&imported);
}

static void test_convert_gguf_file(void **state)
{
    char in[512];
    const char *out = "build/test_import_gguf.pmpd";
    pmpd_convert_summary summary;
    pmpd_error err;
    pmpd_arena a;
    pmpd_model *m;
    (void)state;
    assert_int_equal(pmpd_convert_file(test_shared_path(in, sizeof in, "models/stories260K.gguf"), out, NULL,
                                       &summary, &err),
                     PMPD_OK);
    assert_int_equal(summary.n_tensors, 47);
    assert_int_equal(summary.parameters, 260032);
    pmpd_arena_init(&a, arena_a, sizeof arena_a);
    assert_int_equal(pmpd_model_open_file(out, &a, &m, &err), PMPD_OK);
    assert_int_equal(pmpd_model_get_info(m)->seq_len, 2048);
    assert_int_equal(m->tokenizer.n_tokens, 512);
    pmpd_model_close(m);
    remove(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_equals_llama2c),
        cmocka_unit_test(test_gguf_f16_q8_q4_dequantized),
        cmocka_unit_test(test_gguf_separate_classifier_kept),
        cmocka_unit_test(test_convert_gguf_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
