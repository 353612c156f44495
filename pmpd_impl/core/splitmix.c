#include "pmpd_impl/core/splitmix.h"

PMPD_INTERNAL uint64_t pmpd_splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

PMPD_INTERNAL double pmpd_splitmix64_unit(uint64_t *state)
{
    return (double)(pmpd_splitmix64_next(state) >> 11) * (1.0 / 9007199254740992.0);
}
