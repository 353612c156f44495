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

/* The levels as int8 multiples of one unit per width (the largest level
 * is 127 units), so the product's inner sums are exact integer
 * multiply-adds; rounding moves the MSE by at most 0.15% (0.117482,
 * 0.034590, 0.009514). */
static const int8_t pmpd_nuq_int8_2[16] = {38, 127, -38, -127};
static const int8_t pmpd_nuq_int8_3[16] = {14, 45, 79, 127, -14, -45, -79, -127};
static const int8_t pmpd_nuq_int8_4[16] = {6, 18, 31, 44, 58, 75, 96, 127, -6, -18, -31, -44, -58, -75, -96, -127};

/* Largest Lloyd-Max level / 127: 1.510417608, 2.151945705, 2.732589571. */
static const float pmpd_nuq_units[3] = {0.011893052f, 0.0169444544f, 0.0215164533f};

/* The levels in floats, level k = int8 level k * unit (exact in float). */
static const float pmpd_nuq_levels_2[4] = {38 * 0.011893052f, 127 * 0.011893052f, -38 * 0.011893052f,
                                           -127 * 0.011893052f};
static const float pmpd_nuq_levels_3[8] = {14 * 0.0169444544f,  45 * 0.0169444544f,  79 * 0.0169444544f,
                                           127 * 0.0169444544f, -14 * 0.0169444544f, -45 * 0.0169444544f,
                                           -79 * 0.0169444544f, -127 * 0.0169444544f};
static const float pmpd_nuq_levels_4[16] = {
    6 * 0.0215164533f,   18 * 0.0215164533f,  31 * 0.0215164533f,  44 * 0.0215164533f,
    58 * 0.0215164533f,  75 * 0.0215164533f,  96 * 0.0215164533f,  127 * 0.0215164533f,
    -6 * 0.0215164533f,  -18 * 0.0215164533f, -31 * 0.0215164533f, -44 * 0.0215164533f,
    -58 * 0.0215164533f, -75 * 0.0215164533f, -96 * 0.0215164533f, -127 * 0.0215164533f};

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
