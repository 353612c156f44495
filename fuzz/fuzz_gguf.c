/* GGUF importer; an accepted file is serialized and reopened by the loader.
 * The same bytes are then imported as the streaming converter reads a file
 * (its head in growing parts, the tensors left in the file): that must
 * agree with the whole import (same status and offset), and for an
 * accepted file the stream writer, keeping every tensor f32, must write the
 * serializer's bytes exactly. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "fuzz/import_roundtrip.h"
#include "pmpd_impl/offline/weights/encoders.h"

static uint32_t fuzz_keep_f32(void *context, const pmpd_build_tensor *t)
{
    (void)context;
    (void)t;
    return PMPD_TENSOR_F32;
}

/* What convert.c's reading does: heads of 64 bytes, doubled while short. */
static pmpd_status fuzz_import_in_parts(const uint8_t *data, size_t size, FILE *f, pmpd_build_model *b,
                                        pmpd_error *err)
{
    size_t head = size < 64 ? size : 64;
    int short_read = 1;
    pmpd_status status;
    for (;;) {
        b->source = NULL;
        pmpd_build_free(b);
        b->source = f;
        status = pmpd_import_gguf_unloaded(data, head, size, &short_read, b, err);
        if (status == PMPD_OK || !short_read || head == size)
            return status;
        head = head > size / 2 ? size : 2 * head;
    }
}

static void fuzz_stream_equals_serialized(const pmpd_build_model *whole, const pmpd_build_model *parts)
{
    pmpd_build_stream how;
    void *block;
    unsigned char *container, *streamed;
    size_t container_size;
    uint64_t written;
    int writing;
    FILE *out = tmpfile();
    if (!out || pmpd_build_serialize(whole, &block, &container, &container_size) != PMPD_OK) {
        if (out)
            fclose(out);
        return;
    }
    memset(&how, 0, sizeof how);
    how.type_of = fuzz_keep_f32;
    how.row_block = pmpd_weight_row_block;
    how.tensor_bytes = pmpd_weight_stream_bytes;
    how.encode = pmpd_weight_encode_matrix;
    if (pmpd_build_write_stream(parts, out, &how, &written, &writing, NULL) != PMPD_OK || written != container_size)
        __builtin_trap();
    streamed = (unsigned char *)malloc(container_size + 1);
    if (!streamed || fseek(out, 0, SEEK_SET) != 0 || fread(streamed, 1, container_size, out) != container_size ||
        memcmp(streamed, container, container_size) != 0)
        __builtin_trap();
    free(streamed);
    free(block);
    fclose(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pmpd_build_model whole, parts;
    pmpd_error whole_err, parts_err;
    pmpd_status whole_status, parts_status;
    FILE *f;
    fuzz_import_roundtrip(pmpd_import_gguf, data, size);
    /* fmemopen takes no empty buffer; the roundtrip covered that input. */
    if (size == 0 || (f = fmemopen((void *)(uintptr_t)data, size, "rb")) == NULL)
        return 0;
    pmpd_build_init(&whole);
    pmpd_build_init(&parts);
    whole_status = pmpd_import_gguf(data, size, &whole, &whole_err);
    parts_status = fuzz_import_in_parts(data, size, f, &parts, &parts_err); /* parts owns f */
    if (parts_status != whole_status ||
        (whole_status != PMPD_OK && (parts_err.offset != whole_err.offset || parts_err.message[0] == '\0')))
        __builtin_trap();
    if (whole_status == PMPD_OK)
        fuzz_stream_equals_serialized(&whole, &parts);
    pmpd_build_free(&whole);
    pmpd_build_free(&parts);
    return 0;
}
