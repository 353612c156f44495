/* The Lloyd-Max levels of N(0, 1) at 2, 3 and 4 bits: the fixed points of
 * Lloyd's algorithm (each threshold halfway between two levels, each level
 * the mean of N(0, 1) between its thresholds), iterated to convergence in
 * double precision from evenly spread starts.  Their MSE on N(0, 1):
 * 0.117482, 0.034548, 0.009501 (seed 002's table: 0.1175, 0.0345, 0.0095).
 *
 * In code order (nuq.h): the positive levels increasing, then their
 * negatives.  The levels are symmetric, so a code is a sign bit over a
 * magnitude index: a SIMD lookup needs a table of the 2^(b-1) magnitudes
 * (one AVX2 register at 4 bits) and an XOR of the sign. */
#include "pmpd_impl/weights/nuq/nuq.h"

static const float pmpd_nuq_levels_2[4] = {0.452780035f, 1.510417608f, -0.452780035f, -1.510417608f};

static const float pmpd_nuq_levels_3[8] = {0.245094179f,  0.756005281f,  1.343909279f,  2.151945705f,
                                           -0.245094179f, -0.756005281f, -1.343909279f, -2.151945705f};

static const float pmpd_nuq_levels_4[16] = {
    0.128395030f,  0.388048299f,  0.656759119f,  0.942340456f,  1.256231197f,  1.618046386f,
    2.069017227f,  2.732589571f,  -0.128395030f, -0.388048299f, -0.656759119f, -0.942340456f,
    -1.256231197f, -1.618046386f, -2.069017227f, -2.732589571f};

PMPD_INTERNAL const float *pmpd_nuq_levels(unsigned bits)
{
    return bits == 2 ? pmpd_nuq_levels_2 : bits == 3 ? pmpd_nuq_levels_3 : pmpd_nuq_levels_4;
}
