/* The Lloyd-Max levels of N(0, 1) at 2, 3 and 4 bits: the fixed points of
 * Lloyd's algorithm (each threshold halfway between two levels, each level
 * the mean of N(0, 1) between its thresholds), iterated to convergence in
 * double precision from evenly spread starts.  Their MSE on N(0, 1):
 * 0.117482, 0.034548, 0.009501 (seed 002's table: 0.1175, 0.0345, 0.0095).
 *
 * In code order (nuq.h): the positive levels increasing, then their
 * negatives.  The levels are symmetric, so a code is a sign bit over a
 * magnitude index (the encoder picks the two apart). */
#include "pmpd_impl/weights/nuq/nuq.h"

/* The levels as int8 multiples of one unit per width, so the product's
 * inner sums are exact integer multiply-adds.  No level exceeds 64 units
 * (30 at 2 bits): four products of a level and an int8 activation then
 * fit an int16 (4 * 64 * 127 = 32512), and biased by 64 (32 at 2 bits) a
 * level is an unsigned byte whose VPMADDUBSW pairs cannot saturate
 * (nuq_avx2.c).  Each grid is the one within those bounds closest in MSE
 * to the Lloyd-Max levels (searched around the rounded levels), its unit
 * the MSE-optimal one: MSE on N(0, 1) 0.117482, 0.034593, 0.009522
 * (format version 1's grids of up to 127 units: 0.117482, 0.034590,
 * 0.009514). */
static const int8_t pmpd_nuq_int8_2[16] = {9, 30, -9, -30};
static const int8_t pmpd_nuq_int8_3[16] = {7, 22, 40, 64, -7, -22, -40, -64};
static const int8_t pmpd_nuq_int8_4[16] = {3, 9, 15, 21, 28, 36, 46, 61, -3, -9, -15, -21, -28, -36, -46, -61};

#define U2 0.0503449962f
#define U3 0.0336595662f
#define U4 0.044803232f
static const float pmpd_nuq_units[3] = {U2, U3, U4};

/* The levels in floats, level k = int8 level k * unit (the float product). */
static const float pmpd_nuq_levels_2[4] = {9 * U2, 30 * U2, -9 * U2, -30 * U2};
static const float pmpd_nuq_levels_3[8] = {7 * U3, 22 * U3, 40 * U3, 64 * U3, -7 * U3, -22 * U3, -40 * U3, -64 * U3};
static const float pmpd_nuq_levels_4[16] = {3 * U4,  9 * U4,  15 * U4,  21 * U4,  28 * U4,  36 * U4,
                                            46 * U4, 61 * U4, -3 * U4,  -9 * U4,  -15 * U4, -21 * U4,
                                            -28 * U4, -36 * U4, -46 * U4, -61 * U4};
#undef U2
#undef U3
#undef U4

PMPD_INTERNAL const float *pmpd_nuq_levels(unsigned bits)
{
    return bits == 2 ? pmpd_nuq_levels_2 : bits == 3 ? pmpd_nuq_levels_3 : pmpd_nuq_levels_4;
}

PMPD_INTERNAL const int8_t *pmpd_nuq_levels_int8(unsigned bits)
{
    return bits == 2 ? pmpd_nuq_int8_2 : bits == 3 ? pmpd_nuq_int8_3 : pmpd_nuq_int8_4;
}

PMPD_INTERNAL float pmpd_nuq_unit(unsigned bits)
{
    return pmpd_nuq_units[bits - 2];
}
