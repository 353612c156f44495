/* The bit allocation's multiple-choice knapsack (offline/palette/knapsack.h)
 * against brute force over every assignment: random small instances with
 * ties, groups of a single choice, shared cost divisors, infeasible
 * capacities; and the coarsened table (few cells), which must never exceed
 * the capacity and never beat the true optimum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/palette/knapsack.h"

#define KS_GROUPS 6
#define KS_CHOICES 4

typedef struct ks_instance {
    uint32_t n, count[KS_GROUPS];
    double loss[KS_GROUPS * KS_CHOICES];
    uint64_t cost[KS_GROUPS * KS_CHOICES];
} ks_instance;

static uint64_t ks_rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* The optimum by enumeration: least loss (summed in group order, as the DP
 * sums) among assignments within capacity; *feasible 0 when none is. */
static double ks_brute(const ks_instance *k, uint64_t capacity, int *feasible, uint64_t *least_cost)
{
    uint32_t pick[KS_GROUPS] = {0}, g;
    double best = INFINITY;
    *least_cost = UINT64_MAX;
    for (;;) {
        double loss = 0.0;
        uint64_t cost = 0;
        uint32_t first = 0;
        for (g = 0; g < k->n; g++) {
            loss += k->loss[first + pick[g]];
            cost += k->cost[first + pick[g]];
            first += k->count[g];
        }
        if (cost < *least_cost)
            *least_cost = cost;
        if (cost <= capacity && loss < best)
            best = loss;
        for (g = 0; g < k->n && ++pick[g] == k->count[g]; g++)
            pick[g] = 0;
        if (g == k->n)
            break;
    }
    *feasible = best != INFINITY;
    return best;
}

/* Loss and cost of choice, recomputed here. */
static void ks_score(const ks_instance *k, const uint32_t *choice, double *loss, uint64_t *cost)
{
    uint32_t g, first = 0;
    *loss = 0.0;
    *cost = 0;
    for (g = 0; g < k->n; g++) {
        assert_true(choice[g] < k->count[g]);
        *loss += k->loss[first + choice[g]];
        *cost += k->cost[first + choice[g]];
        first += k->count[g];
    }
}

static void ks_random(ks_instance *k, uint64_t *s)
{
    uint32_t g, j, first = 0;
    uint64_t scale = 1 + ks_rng(s) % 40; /* a shared divisor of every cost */
    k->n = 1 + (uint32_t)(ks_rng(s) % KS_GROUPS);
    for (g = 0; g < k->n; g++) {
        k->count[g] = ks_rng(s) % 5 == 0 ? 1 : 1 + (uint32_t)(ks_rng(s) % KS_CHOICES);
        for (j = 0; j < k->count[g]; j++) {
            /* Few distinct values, so ties in loss and in cost are common. */
            k->loss[first + j] = (double)(ks_rng(s) % 6) * 0.25;
            k->cost[first + j] = scale * (ks_rng(s) % 9);
        }
        first += k->count[g];
    }
}

static void test_knapsack_matches_brute_force(void **state)
{
    uint64_t s = 12345;
    int trial, infeasible = 0, feasible_count = 0;
    (void)state;
    for (trial = 0; trial < 3000; trial++) {
        ks_instance k;
        uint32_t choice[KS_GROUPS];
        pmpd_knapsack_result r;
        pmpd_knapsack_status st;
        uint64_t least, capacity, cost;
        double expect, loss;
        int feasible;
        ks_random(&k, &s);
        capacity = ks_rng(&s) % (40 * 9 * (uint64_t)k.n);
        expect = ks_brute(&k, capacity, &feasible, &least);
        st = pmpd_knapsack_solve(k.n, k.count, k.loss, k.cost, capacity, 0, choice, &r);
        if (!feasible) {
            assert_int_equal(st, PMPD_KNAPSACK_INFEASIBLE);
            assert_int_equal(r.cost, least); /* says how far short the capacity is */
            infeasible++;
            continue;
        }
        feasible_count++;
        assert_int_equal(st, PMPD_KNAPSACK_OK);
        assert_true(r.exact);
        ks_score(&k, choice, &loss, &cost);
        assert_true(cost <= capacity);
        assert_int_equal(cost, r.cost);
        assert_true(loss == r.loss);
        assert_true(fabs(loss - expect) <= 1e-12);
    }
    /* Both kinds of instance were exercised. */
    assert_true(infeasible > 100);
    assert_true(feasible_count > 1000);
}

/* Real-valued losses, large costs, and a table of only a few cells: the
 * coarsened answer stays within capacity and is never better than the
 * optimum (and equals it when the table is exact). */
static void test_knapsack_coarsened(void **state)
{
    uint64_t s = 777;
    int trial;
    (void)state;
    for (trial = 0; trial < 1000; trial++) {
        ks_instance k;
        uint32_t g, j, first = 0, choice[KS_GROUPS];
        pmpd_knapsack_result r;
        pmpd_knapsack_status st;
        uint64_t least, capacity, cost;
        double expect, loss;
        int feasible;
        ks_random(&k, &s);
        for (g = 0; g < k.n; g++, first += k.count[g - 1])
            for (j = 0; j < k.count[g]; j++) {
                k.loss[first + j] = (double)ks_rng(&s) / 2147483648.0;
                k.cost[first + j] = 1000 + ks_rng(&s) % 100000;
            }
        capacity = ks_rng(&s) % (100000 * (uint64_t)k.n);
        expect = ks_brute(&k, capacity, &feasible, &least);
        st = pmpd_knapsack_solve(k.n, k.count, k.loss, k.cost, capacity, (size_t)k.n * 64, choice, &r);
        if (st == PMPD_KNAPSACK_INFEASIBLE)
            continue; /* real-cost infeasible, or lost to rounding up */
        assert_int_equal(st, PMPD_KNAPSACK_OK);
        assert_true(feasible);
        ks_score(&k, choice, &loss, &cost);
        assert_true(cost <= capacity);
        assert_true(loss >= expect - 1e-12);
        if (r.exact)
            assert_true(fabs(loss - expect) <= 1e-12);
    }
}

static void test_knapsack_edges(void **state)
{
    /* One group of one choice: taken when it fits, refused when not. */
    uint32_t one = 1, choice[3];
    double loss1 = 2.5;
    uint64_t cost1 = 10;
    /* Exact ties: equal loss at different costs; the cheaper fits. */
    uint32_t counts[3] = {2, 1, 3};
    double losses[6] = {1.0, 1.0, 0.0, 3.0, 3.0, 0.5};
    uint64_t costs[6] = {4, 2, 5, 1, 1, 9};
    pmpd_knapsack_result r;
    (void)state;
    assert_int_equal(pmpd_knapsack_solve(1, &one, &loss1, &cost1, 10, 0, choice, &r), PMPD_KNAPSACK_OK);
    assert_int_equal(choice[0], 0);
    assert_true(r.loss == 2.5);
    assert_int_equal(r.cost, 10);
    assert_int_equal(pmpd_knapsack_solve(1, &one, &loss1, &cost1, 9, 0, choice, &r), PMPD_KNAPSACK_INFEASIBLE);
    assert_int_equal(r.cost, 10);
    /* Capacity 8: {1 or 0} + 5 + 1 fits with group 0's either choice. */
    assert_int_equal(pmpd_knapsack_solve(3, counts, losses, costs, 8, 0, choice, &r), PMPD_KNAPSACK_OK);
    assert_true(r.loss == 4.0);
    assert_true(r.cost <= 8);
    /* Capacity 16: group 2's best (0.5 at 9) now fits beside 2 + 5. */
    assert_int_equal(pmpd_knapsack_solve(3, counts, losses, costs, 16, 0, choice, &r), PMPD_KNAPSACK_OK);
    assert_true(r.loss == 1.5);
    assert_int_equal(choice[1], 0);
    assert_int_equal(choice[2], 2);
    assert_int_equal(choice[0], 1);
    /* Capacity 7: below the least cost 2 + 5 + 1 = 8. */
    assert_int_equal(pmpd_knapsack_solve(3, counts, losses, costs, 7, 0, choice, &r), PMPD_KNAPSACK_INFEASIBLE);
    assert_int_equal(r.cost, 8);
    /* Bad instances. */
    counts[1] = 0;
    assert_int_equal(pmpd_knapsack_solve(3, counts, losses, costs, 16, 0, choice, &r), PMPD_KNAPSACK_INVALID);
    counts[1] = 1;
    losses[2] = NAN;
    assert_int_equal(pmpd_knapsack_solve(3, counts, losses, costs, 16, 0, choice, &r), PMPD_KNAPSACK_INVALID);
    assert_int_equal(pmpd_knapsack_solve(0, counts, losses, costs, 16, 0, choice, &r), PMPD_KNAPSACK_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knapsack_matches_brute_force),
        cmocka_unit_test(test_knapsack_coarsened),
        cmocka_unit_test(test_knapsack_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
