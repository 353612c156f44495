/* Offline PQ codebook training and the KV codebook section: k-means finds
 * well-separated clusters, is deterministic per seed, and the section
 * round-trips through the runtime parser, which rejects malformed bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/kvcache/pq_codebook_set.h"
#include "tests/support/test_support.h"

#define DIM 8
#define SUB 2
#define BITS 4
#define CLUSTERS 16
#define PER_CLUSTER 25

/* Cluster centre c of subspace s: a 4x4 grid, shifted per subspace. */
static float true_centre(uint32_t s, uint32_t c, uint32_t j)
{
    return (float)(j == 0 ? c % 4 : c / 4) * 3.0f + (float)s;
}

static float *clustered_samples(size_t *count)
{
    test_rng rng;
    size_t n = CLUSTERS * PER_CLUSTER, i;
    float *x = malloc(n * DIM * sizeof(float));
    uint32_t s, j;
    assert_non_null(x);
    test_rng_seed(&rng, 7);
    for (i = 0; i < n; i++)
        for (s = 0; s < DIM / SUB; s++) {
            /* Each subspace draws its cluster independently of the others. */
            uint32_t c = test_rng_u32(&rng) % CLUSTERS;
            for (j = 0; j < SUB; j++)
                x[i * DIM + s * SUB + j] = true_centre(s, c, j) + 0.05f * test_rng_normal(&rng);
        }
    *count = n;
    return x;
}

static void test_kmeans_finds_clusters(void **state)
{
    size_t n, floats = (size_t)DIM << BITS;
    float *x = clustered_samples(&n), *book = malloc(floats * sizeof(float)), *again = malloc(floats * sizeof(float));
    uint32_t s, c, k;
    (void)state;
    assert_true(book && again);
    assert_int_equal(pmpd_pq_train_codebook(x, n, DIM, SUB, BITS, 25, 42, book), PMPD_OK);
    for (s = 0; s < DIM / SUB; s++)
        for (c = 0; c < CLUSTERS; c++) {
            double best = INFINITY;
            for (k = 0; k < CLUSTERS; k++) {
                const float *centroid = book + ((size_t)s * CLUSTERS + k) * SUB;
                double dx = centroid[0] - true_centre(s, c, 0), dy = centroid[1] - true_centre(s, c, 1);
                double d = sqrt(dx * dx + dy * dy);
                best = d < best ? d : best;
            }
            assert_true(best < 0.1);
        }
    assert_int_equal(pmpd_pq_train_codebook(x, n, DIM, SUB, BITS, 25, 42, again), PMPD_OK);
    assert_memory_equal(book, again, floats * sizeof(float));
    assert_int_equal(pmpd_pq_train_codebook(x, n, DIM, 3, BITS, 25, 42, book), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pq_train_codebook(x, 0, DIM, SUB, BITS, 25, 42, book), PMPD_ERR_INVALID_ARGUMENT);
    x[5] = NAN;
    assert_int_equal(pmpd_pq_train_codebook(x, n, DIM, SUB, BITS, 25, 42, book), PMPD_ERR_INVALID_ARGUMENT);
    free(x);
    free(book);
    free(again);
}

/* Fewer samples than centroids still gives a usable (finite) codebook. */
static void test_kmeans_few_samples(void **state)
{
    float x[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, book[4 << 8];
    size_t i;
    (void)state;
    assert_int_equal(pmpd_pq_train_codebook(x, 3, 4, 4, 8, 10, 1, book), PMPD_OK);
    for (i = 0; i < sizeof book / sizeof book[0]; i++)
        assert_true(book[i] >= 1.0f && book[i] <= 12.0f);
}

static void test_section_round_trip_and_rejects(void **state)
{
    /* Two books (one per layer) of head_dim 8: K in 2-dim, V in 4-dim subspaces. */
    const uint32_t head_dim = 8, bits = 3, layers = 2;
    size_t pair = (size_t)head_dim << bits, floats = 2 * pair * layers, size = 0, i;
    float *centroids = malloc(floats * sizeof(float));
    unsigned char *blob;
    pmpd_pq_codebook_set set;
    pmpd_pq_codebook keys, values;
    pmpd_error err;
    (void)state;
    assert_non_null(centroids);
    for (i = 0; i < floats; i++)
        centroids[i] = (float)i * 0.25f;
    assert_int_equal(pmpd_pq_section_write(head_dim, 2, 4, bits, layers, NULL, NULL, 0, &size), PMPD_OK);
    assert_int_equal(size, PMPD_PQ_SECTION_HEADER_BYTES + floats * sizeof(float));
    blob = malloc(size); /* malloc aligns for float, as the parser requires */
    assert_non_null(blob);
    assert_int_equal(pmpd_pq_section_write(head_dim, 2, 4, bits, layers, centroids, blob, size, &size), PMPD_OK);
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, head_dim, layers, &set, &err), PMPD_OK);
    assert_int_equal(set.n_books, 2);
    assert_int_equal(set.keys.n_sub, 4);
    assert_int_equal(set.values.n_sub, 2);
    pmpd_pq_codebook_set_layer(&set, 1, &keys, &values);
    assert_true(keys.centroids[0] == centroids[2 * pair]);
    assert_true(values.centroids[0] == centroids[2 * pair + pair]);

    /* Malformed sections: each fails with its own status. */
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, 31, head_dim, layers, &set, &err), PMPD_ERR_FORMAT_TRUNCATED);
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size - 4, head_dim, layers, &set, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, 16, layers, &set, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, head_dim, 3, &set, &err), PMPD_ERR_FORMAT_VALUE);
    blob[4] = 3;
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, head_dim, layers, &set, &err), PMPD_ERR_FORMAT_VALUE);
    blob[4] = 2;
    blob[28] = 1;
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, head_dim, layers, &set, &err), PMPD_ERR_FORMAT_VALUE);
    blob[28] = 0;
    memset(blob + size - 4, 0xff, 4);
    assert_int_equal(pmpd_pq_codebook_set_parse(blob, size, head_dim, layers, &set, &err), PMPD_ERR_FORMAT_NONFINITE);
    assert_int_equal(err.offset, size - 4);
    free(blob);
    free(centroids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kmeans_finds_clusters),
        cmocka_unit_test(test_kmeans_few_samples),
        cmocka_unit_test(test_section_round_trip_and_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
