#include "pmpd_impl/offline/palette/knapsack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t knapsack_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Units per column: the gcd of the costs (1 when every cost is 0), raised
 * to ceil(capacity / (columns - 1)) when the exact table would not fit. */
static uint64_t knapsack_unit(const uint64_t *cost, size_t n, uint64_t capacity, uint64_t max_columns)
{
    uint64_t unit = 0, coarse;
    size_t i;
    for (i = 0; i < n; i++)
        unit = knapsack_gcd(unit, cost[i]);
    if (unit == 0)
        unit = 1;
    if (capacity / unit < max_columns)
        return unit;
    coarse = capacity / (max_columns - 1) + 1;
    return coarse > unit ? coarse : unit;
}

PMPD_INTERNAL pmpd_knapsack_status pmpd_knapsack_solve(uint32_t n_groups, const uint32_t *count,
                                                       const double *loss, const uint64_t *cost,
                                                       uint64_t capacity, size_t max_cells, uint32_t *choice,
                                                       pmpd_knapsack_result *result)
{
    size_t total = 0, first, g, j, c, columns;
    uint64_t unit, cap, least = 0;
    double *best, *next;
    unsigned char *back;
    if (!count || !loss || !cost || !choice || !result || n_groups == 0)
        return PMPD_KNAPSACK_INVALID;
    memset(result, 0, sizeof *result);
    for (g = 0; g < n_groups; g++) {
        uint64_t cheapest = UINT64_MAX;
        if (count[g] == 0 || count[g] > PMPD_KNAPSACK_MAX_CHOICES)
            return PMPD_KNAPSACK_INVALID;
        for (j = 0; j < count[g]; j++) {
            if (!isfinite(loss[total + j]))
                return PMPD_KNAPSACK_INVALID;
            cheapest = cost[total + j] < cheapest ? cost[total + j] : cheapest;
        }
        least = UINT64_MAX - least < cheapest ? UINT64_MAX : least + cheapest;
        total += count[g];
    }
    if (max_cells == 0)
        max_cells = (size_t)1 << 26;
    if (max_cells / n_groups < 2)
        return PMPD_KNAPSACK_INVALID;
    unit = knapsack_unit(cost, total, capacity, max_cells / n_groups);
    result->unit = unit;
    result->cost = least;
    cap = capacity / unit;
    columns = (size_t)cap + 1;
    /* Infeasible in real bytes, or (coarsened) once rounded to units. */
    if (least > capacity)
        return PMPD_KNAPSACK_INFEASIBLE;
    best = (double *)malloc(columns * sizeof *best);
    next = (double *)malloc(columns * sizeof *next);
    back = (unsigned char *)malloc((size_t)n_groups * columns);
    if (!best || !next || !back) {
        free(best);
        free(next);
        free(back);
        return PMPD_KNAPSACK_NO_MEMORY;
    }
    /* No group yet: loss 0 within any cost. */
    for (c = 0; c < columns; c++)
        best[c] = 0.0;
    first = 0;
    for (g = 0; g < n_groups; g++) {
        unsigned char *row = back + g * columns;
        for (c = 0; c < columns; c++) {
            next[c] = INFINITY;
            row[c] = 0;
            for (j = 0; j < count[g]; j++) {
                uint64_t units = (cost[first + j] + unit - 1) / unit;
                double v;
                if (units > c || best[c - units] == INFINITY)
                    continue;
                v = best[c - units] + loss[first + j];
                if (v < next[c]) {
                    next[c] = v;
                    row[c] = (unsigned char)j;
                }
            }
        }
        memcpy(best, next, columns * sizeof *best);
        first += count[g];
    }
    if (best[cap] == INFINITY) {
        free(best);
        free(next);
        free(back);
        return PMPD_KNAPSACK_INFEASIBLE; /* feasible in bytes but not once costs are rounded up to units */
    }
    /* Walk the back-pointers from the last group down. */
    c = (size_t)cap;
    first = total;
    result->loss = 0.0;
    result->cost = 0;
    for (g = n_groups; g-- > 0;) {
        uint32_t pick = back[g * columns + c];
        first -= count[g];
        choice[g] = pick;
        c -= (size_t)((cost[first + pick] + unit - 1) / unit);
        result->cost += cost[first + pick];
    }
    /* The loss summed in group order, as the DP did, so it equals best[cap]. */
    first = 0;
    for (g = 0; g < n_groups; g++) {
        result->loss += loss[first + choice[g]];
        first += count[g];
    }
    result->exact = unit == knapsack_unit(cost, total, 0, 2);
    free(best);
    free(next);
    free(back);
    return PMPD_KNAPSACK_OK;
}
