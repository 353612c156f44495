/* Builds against the amalgamated build/pmpd.h alone: no other pmpd file is
 * on the include path.  Exercises a little of everything public. */
#define PMPD_IMPLEMENTATION
#include "pmpd.h"

#include <stdio.h>
#include <string.h>

static unsigned char buffer[4096];

int main(void)
{
    pmpd_arena arena;
    pmpd_error err;
    void *block = NULL;
    if (pmpd_arena_init(&arena, buffer, sizeof buffer) != PMPD_OK ||
        pmpd_arena_alloc(&arena, 100, 16, &block) != PMPD_OK || block == NULL ||
        pmpd_arena_alloc(&arena, sizeof buffer, 16, &block) != PMPD_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "amalgamation: arena misbehaves\n");
        return 1;
    }
    pmpd_error_clear(&err);
    if (err.code != PMPD_OK || strcmp(pmpd_strerror(PMPD_ERR_OUT_OF_MEMORY), "arena exhausted") != 0) {
        fprintf(stderr, "amalgamation: status strings misbehave\n");
        return 1;
    }
    printf("amalgamation: ok (pmpd %s)\n", PMPD_VERSION_STRING);
    return 0;
}
