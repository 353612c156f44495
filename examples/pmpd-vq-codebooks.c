/* pmpd-vq-codebooks [SAMPLES_PER_POINT]: writes to stdout the C source of
 * pmpd_impl/weights/vq/vq_codebooks.c, the 2-D VQ codebooks (16, 32, 64,
 * 128 and 256 points) trained by Lloyd's algorithm on standard Gaussian
 * pairs (offline/vq/vq_codebook.h) and rounded to int8 units, with each
 * width's MSE on a fresh sample.  Deterministic: the stored tables are
 * this program's output (default 2000 pairs per point, 400 steps). */
#include <stdio.h>
#include <stdlib.h>

#include "pmpd_impl/offline/vq/vq_codebook.h"

#define VQ_FRESH_PAIRS 1000000
#define VQ_STEPS 400

/* The MSE per coordinate of the int8-rounded codebook on a fresh sample. */
static double rounded_mse(const int8_t *q, float unit, unsigned points, const float *fresh, size_t n)
{
    float rounded[512];
    unsigned i;
    for (i = 0; i < 2 * points; i++)
        rounded[i] = (float)q[i] * unit;
    return pmpd_vq_lloyd_step(rounded, points, fresh, n);
}

int main(int argc, char **argv)
{
    const unsigned long per_point = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
    float *fresh = (float *)malloc(2 * (size_t)VQ_FRESH_PAIRS * sizeof *fresh);
    unsigned bits;
    if (!fresh || per_point == 0)
        return 1;
    pmpd_vq_gaussian_pairs(PMPD_VQ_CODEBOOK_SEED + 1, VQ_FRESH_PAIRS, fresh);
    printf("/* The 2-D VQ codebooks (vq.h), written by examples/pmpd-vq-codebooks.c\n"
           " * (%lu Gaussian pairs per point from PMPD_VQ_CODEBOOK_SEED, at most %d\n"
           " * Lloyd steps): point k of the 2^p-point book is (x, y) = (book[2k],\n"
           " * book[2k + 1]) times the book's unit.  MSE per coordinate of N(0, 1)\n"
           " * on %d fresh pairs, after the int8 rounding: */\n",
           per_point, VQ_STEPS, VQ_FRESH_PAIRS);
    printf("#include \"pmpd_impl/weights/vq/vq.h\"\n\n");
    for (bits = 4; bits <= 8; bits++) {
        float book[512];
        int8_t q[512];
        float unit;
        unsigned points = 1u << bits, i;
        if (pmpd_vq_train(points, per_point * points, PMPD_VQ_CODEBOOK_SEED, VQ_STEPS, book) != PMPD_OK)
            return 1;
        unit = pmpd_vq_round_int8(book, points, q);
        printf("/* %u points (%.1f bits per weight): %.6f */\n", points, bits / 2.0,
               rounded_mse(q, unit, points, fresh, VQ_FRESH_PAIRS));
        printf("static const int8_t pmpd_vq_book_%u[%u] = {", bits, 2 * points);
        for (i = 0; i < 2 * points; i++)
            printf("%s%d,", i % 16 ? " " : "\n    ", q[i]);
        printf("\n};\n#define PMPD_VQ_UNIT_%u %.9gf\n\n", bits, unit);
    }
    printf("static const int8_t *const pmpd_vq_books[5] = {pmpd_vq_book_4, pmpd_vq_book_5, pmpd_vq_book_6, pmpd_vq_book_7,\n"
           "                                               pmpd_vq_book_8};\n"
           "static const float pmpd_vq_units[5] = {PMPD_VQ_UNIT_4, PMPD_VQ_UNIT_5, PMPD_VQ_UNIT_6, PMPD_VQ_UNIT_7,\n"
           "                                       PMPD_VQ_UNIT_8};\n"
           "\n"
           "PMPD_INTERNAL const int8_t *pmpd_vq_book(unsigned pair_bits)\n"
           "{\n"
           "    return pmpd_vq_books[pair_bits - PMPD_VQ_MIN_PAIR_BITS];\n"
           "}\n"
           "\n"
           "PMPD_INTERNAL float pmpd_vq_unit(unsigned pair_bits)\n"
           "{\n"
           "    return pmpd_vq_units[pair_bits - PMPD_VQ_MIN_PAIR_BITS];\n"
           "}\n"
           "\n"
           "#undef PMPD_VQ_UNIT_4\n"
           "#undef PMPD_VQ_UNIT_5\n"
           "#undef PMPD_VQ_UNIT_6\n"
           "#undef PMPD_VQ_UNIT_7\n"
           "#undef PMPD_VQ_UNIT_8\n");
    free(fresh);
    return 0;
}
