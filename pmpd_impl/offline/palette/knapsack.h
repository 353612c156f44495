/* The multiple-choice knapsack of seed 002's bit allocation, on its own so
 * that it can be checked against brute force (tests/test_knapsack.c).
 *
 * Groups g = 0..n-1 each offer count[g] >= 1 choices, choice j of group g
 * with a loss (any finite double) and an integer cost.  Exactly one choice
 * per group; minimize the summed loss with the summed cost <= capacity.
 * Dynamic programming over cost: best[c] = the least loss of the groups so
 * far within cost c, one table row of back-pointers per group.
 *
 * The table has capacity / unit + 1 columns, where unit is the greatest
 * common divisor of every cost (then the DP is exact: sums of costs are
 * multiples of it, so "sum <= capacity" and "sum / unit <= capacity / unit"
 * agree).  When that would need more than max_cells cells in all, unit is
 * raised until it fits, each cost rounded up to whole units and the
 * capacity down: the answer is then optimal for the coarsened costs and
 * its real cost still never exceeds capacity (rounding only overestimates
 * what a choice costs). */
#ifndef PMPD_OFFLINE_PALETTE_KNAPSACK_H
#define PMPD_OFFLINE_PALETTE_KNAPSACK_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* At most this many choices per group (back-pointers are bytes). */
#define PMPD_KNAPSACK_MAX_CHOICES 255u

typedef enum pmpd_knapsack_status {
    PMPD_KNAPSACK_OK = 0,
    PMPD_KNAPSACK_INFEASIBLE = 1, /* even the cheapest choices exceed capacity (in units) */
    PMPD_KNAPSACK_INVALID = 2,    /* NULL, no group, a count of 0 or above the maximum, a loss not finite */
    PMPD_KNAPSACK_NO_MEMORY = 3
} pmpd_knapsack_status;

typedef struct pmpd_knapsack_result {
    double loss;     /* summed loss of the choice */
    uint64_t cost;   /* summed real cost (<= capacity) */
    uint64_t unit;   /* cost units per DP column: the gcd, or coarser (above) */
    int exact;       /* 1 when unit is the gcd of the costs: the optimum itself */
} pmpd_knapsack_result;

/* Solves the instance above: loss and cost hold sum(count) entries, group
 * after group; choice[g] receives group g's pick (an index below
 * count[g]).  max_cells bounds the back-pointer table ((n_groups) x
 * (columns) bytes); 0 means 1 << 26.  Ties go to the lower choice index of
 * the last group first.  Uses the heap for the table.  On
 * PMPD_KNAPSACK_INFEASIBLE, result->cost is the least cost there is, so the
 * caller can say by how much the capacity falls short. */
PMPD_INTERNAL pmpd_knapsack_status pmpd_knapsack_solve(uint32_t n_groups, const uint32_t *count,
                                                       const double *loss, const uint64_t *cost,
                                                       uint64_t capacity, size_t max_cells, uint32_t *choice,
                                                       pmpd_knapsack_result *result);

#endif
#endif
