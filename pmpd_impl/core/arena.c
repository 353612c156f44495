#include "pmpd.h"
#include "pmpd_impl/core/checked.h"

pmpd_status pmpd_arena_init(pmpd_arena *arena, void *buffer, size_t size)
{
    size_t misalignment = 0;
    if (!arena)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (buffer) {
        uintptr_t address = (uintptr_t)buffer;
        misalignment = (size_t)((PMPD_ARENA_ALIGNMENT - address % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT);
        if (misalignment > size)
            misalignment = size;
    }
    arena->base = buffer ? (unsigned char *)buffer + misalignment : NULL;
    arena->capacity = size - misalignment;
    arena->used = 0;
    arena->high_water = 0;
    return PMPD_OK;
}

pmpd_status pmpd_arena_alloc(pmpd_arena *arena, size_t size, size_t align, void **out)
{
    size_t start, end;
    if (out)
        *out = NULL;
    if (!arena || !out || !pmpd_is_power_of_two(align))
        return PMPD_ERR_INVALID_ARGUMENT;
    if (align < PMPD_ARENA_ALIGNMENT)
        align = PMPD_ARENA_ALIGNMENT;
    /* The base is PMPD_ARENA_ALIGNMENT-aligned; larger alignments are
     * computed on offsets when measuring, on addresses otherwise. */
    if (arena->base && align > PMPD_ARENA_ALIGNMENT) {
        uintptr_t address = (uintptr_t)(arena->base + arena->used);
        size_t pad = (size_t)((align - address % align) % align);
        if (!pmpd_checked_add(arena->used, pad, &start))
            return PMPD_ERR_OVERFLOW;
    } else if (!pmpd_checked_align_up(arena->used, align, &start)) {
        return PMPD_ERR_OVERFLOW;
    }
    if (!pmpd_checked_add(start, size, &end))
        return PMPD_ERR_OVERFLOW;
    if (end > arena->capacity)
        return PMPD_ERR_OUT_OF_MEMORY;
    arena->used = end;
    if (end > arena->high_water)
        arena->high_water = end;
    *out = arena->base ? arena->base + start : NULL;
    return PMPD_OK;
}

pmpd_status pmpd_arena_alloc_array(pmpd_arena *arena, size_t count, size_t elem_size,
                                   size_t align, void **out)
{
    size_t bytes;
    if (out)
        *out = NULL;
    if (!pmpd_checked_mul(count, elem_size, &bytes))
        return PMPD_ERR_OVERFLOW;
    return pmpd_arena_alloc(arena, bytes, align, out);
}

pmpd_arena_mark pmpd_arena_save(const pmpd_arena *arena)
{
    pmpd_arena_mark mark;
    mark.used = arena ? arena->used : 0;
    return mark;
}

void pmpd_arena_restore(pmpd_arena *arena, pmpd_arena_mark mark)
{
    if (arena && mark.used <= arena->used)
        arena->used = mark.used;
}

size_t pmpd_arena_remaining(const pmpd_arena *arena)
{
    size_t start;
    if (!arena || !pmpd_checked_align_up(arena->used, PMPD_ARENA_ALIGNMENT, &start) ||
        start > arena->capacity)
        return 0;
    return arena->capacity - start;
}
