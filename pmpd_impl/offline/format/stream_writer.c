/* The container written one tensor at a time (pmpd_build_write_stream):
 * what lets a converter turn a model larger than the machine's memory into
 * a container, since only one tensor's floats and encoding exist at once. */
#include "pmpd_impl/offline/format/builder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/weights/format.h"

/* Writes size bytes at offset at of the container; *writing marks a failure
 * as the output's, not the input's. */
static pmpd_status stream_put(FILE *f, const void *data, uint64_t size, uint64_t at, int *writing, pmpd_error *err)
{
    if (size && fwrite(data, 1, (size_t)size, f) != size) {
        *writing = 1;
        return pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write the container at byte %llu: %s",
                              (unsigned long long)at, strerror(errno));
    }
    return PMPD_OK;
}

/* Zeros from at up to the next aligned offset, as the serializer's calloc leaves them. */
static pmpd_status stream_pad(FILE *f, uint64_t at, int *writing, pmpd_error *err)
{
    static const unsigned char zeros[PMPD_CONTAINER_ALIGNMENT];
    return stream_put(f, zeros, pmpd_build_align(at) - at, at, writing, err);
}

/* Floats encoded at once by default, at most (a tensor whose format needs
 * all its rows together, q2cb, is taken whole): a Llama 3 8B embedding is
 * 2.1 GB of floats, more than a 2 GB board has. */
#define STREAM_CHUNK_BYTES ((uint64_t)32 << 20)

/* Writes tensor t as type (size bytes planned) a chunk of rows at a time:
 * reads the rows' floats, encodes them into their slice of the stored
 * bytes (formats lay rows out in blocks of row_block rows, so a chunk of
 * whole blocks is a contiguous slice) and writes it, checksumming as it
 * goes into *crc.  Tensors that were not f32 are written as they are. */
static pmpd_status stream_tensor(const pmpd_build_model *b, FILE *f, const pmpd_build_stream *how,
                                 const pmpd_build_tensor *t, uint32_t type, uint64_t size, uint64_t at,
                                 uint32_t *crc, int *writing, pmpd_error *err)
{
    uint64_t cols = t->dims[t->n_dims - 1], rows = t->size / 4 / cols, step, r, done = 0, out_size = 0, dims[2];
    uint64_t block = type == PMPD_TENSOR_F32 ? 1 : how->row_block(type);
    const pmpd_convert_options *options = how->options_of ? how->options_of(how->context, t) : how->options;
    const struct pmpd_ldlq *ldlq = how->ldlq_of ? how->ldlq_of(how->context, t, type) : NULL;
    float *values = NULL;
    unsigned char *out = NULL;
    pmpd_status status = PMPD_OK;
    if (t->type != PMPD_TENSOR_F32) {
        *crc = pmpd_crc32_update(0, t->data, (size_t)t->size);
        return stream_put(f, t->data, t->size, at, writing, err);
    }
    step = block ? ((how->chunk_bytes ? how->chunk_bytes : STREAM_CHUNK_BYTES) / 4 / cols) / block * block : rows;
    if (step < block)
        step = block;
    if (step > rows)
        step = rows;
    dims[0] = step;
    dims[1] = cols;
    if (type != PMPD_TENSOR_F32 && how->tensor_bytes(options, type, 2, dims, &out_size) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "tensor %s cannot be stored as %s",
                              t->name, pmpd_tensor_type_name((pmpd_tensor_type)type));
    if (step * cols > SIZE_MAX / 4 || out_size > SIZE_MAX)
        return pmpd_error_set(err, PMPD_ERR_OVERFLOW, PMPD_NO_OFFSET, "tensor %s is too large for this machine",
                              t->name);
    values = (float *)malloc((size_t)(step * cols * 4));
    out = type == PMPD_TENSOR_F32 ? NULL : (unsigned char *)malloc((size_t)out_size);
    if (!values || (type != PMPD_TENSOR_F32 && !out))
        status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for tensor %s", t->name);
    *crc = 0;
    for (r = 0; status == PMPD_OK && r < rows; r += step) {
        uint64_t n = rows - r < step ? rows - r : step, bytes = n * cols * 4;
        const unsigned char *slice = (const unsigned char *)values; /* f32: the host's little-endian floats */
        status = pmpd_build_tensor_floats(b, t, r, n, values, err);
        if (status == PMPD_OK && type != PMPD_TENSOR_F32) {
            dims[0] = n;
            dims[1] = cols;
            status = how->tensor_bytes(options, type, 2, dims, &bytes);
            if (status == PMPD_OK && done + bytes <= size && bytes <= out_size)
                status = how->encode(options, type, ldlq, values, n, cols, out, (size_t)bytes);
            else
                status = PMPD_ERR_INVALID_ARGUMENT;
            if (status != PMPD_OK)
                status = pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot encode tensor %s as %s", t->name,
                                        pmpd_tensor_type_name((pmpd_tensor_type)type));
            slice = out;
        }
        if (status == PMPD_OK) {
            *crc = pmpd_crc32_update(*crc, slice, (size_t)bytes);
            status = stream_put(f, slice, bytes, at + done, writing, err);
            done += bytes;
        }
    }
    if (status == PMPD_OK && done != size)
        status = pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                "tensor %s: %llu bytes encoded of the %llu planned", t->name,
                                (unsigned long long)done, (unsigned long long)size);
    free(values);
    free(out);
    return status;
}

/* Every tensor's stored type and size, and the container's length. */
static pmpd_status stream_plan(const pmpd_build_model *b, const pmpd_build_stream *how, uint32_t *types,
                               uint64_t *sizes, uint64_t *total, pmpd_error *err)
{
    uint64_t at = pmpd_build_align(pmpd_build_directory_end(b));
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        types[i] = t->type == PMPD_TENSOR_F32 ? how->type_of(how->context, t) : t->type;
        sizes[i] = t->size;
        if (types[i] != t->type &&
            how->tensor_bytes(how->options_of ? how->options_of(how->context, t) : how->options, types[i], t->n_dims,
                              t->dims, &sizes[i]) != PMPD_OK)
            return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                  "tensor %s cannot be stored as %s", t->name,
                                  pmpd_tensor_type_name((pmpd_tensor_type)types[i]));
        if (!pmpd_checked_add_u64(at, sizes[i], &at) || at > UINT64_MAX - PMPD_CONTAINER_ALIGNMENT)
            return pmpd_error_set(err, PMPD_ERR_OVERFLOW, PMPD_NO_OFFSET, "the container's size overflows");
        at = pmpd_build_align(at);
    }
    for (i = 0; i < b->n_sections; i++)
        at = pmpd_build_align(at + b->sections[i].size);
    *total = at;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_build_write_stream(const pmpd_build_model *b, FILE *f, const pmpd_build_stream *how,
                                                  uint64_t *size, int *writing, pmpd_error *err)
{
    uint64_t directory_end = pmpd_build_directory_end(b), at = pmpd_build_align(directory_end), total = 0;
    unsigned char *head = (unsigned char *)calloc(1, (size_t)at);
    uint32_t *types = (uint32_t *)malloc((size_t)b->n_tensors * sizeof *types + 1);
    uint64_t *sizes = (uint64_t *)malloc((size_t)b->n_tensors * sizeof *sizes + 1);
    pmpd_status status = head && types && sizes ? PMPD_OK
                                                : pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    uint32_t i;
    *size = 0;
    *writing = 0;
    if (status == PMPD_OK)
        status = stream_plan(b, how, types, sizes, &total, err);
    /* The header and directory are written last, over these zeros. */
    if (status == PMPD_OK)
        status = stream_put(f, head, at, 0, writing, err);
    for (i = 0; status == PMPD_OK && i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        uint32_t crc = 0;
        status = stream_tensor(b, f, how, t, types[i], sizes[i], at, &crc, writing, err);
        if (status == PMPD_OK) {
            pmpd_build_put_tensor_entry(head, i, t, types[i], at, sizes[i], crc);
            status = stream_pad(f, at + sizes[i], writing, err);
        }
        at = pmpd_build_align(at + sizes[i]);
        if (status == PMPD_OK && how->written)
            how->written(how->context, i, t, types[i], at, total);
    }
    for (i = 0; status == PMPD_OK && i < b->n_sections; i++) {
        const pmpd_build_section *s = &b->sections[i];
        pmpd_build_put_section_entry(head, b->n_tensors, i, s, at);
        status = stream_put(f, s->data, s->size, at, writing, err);
        if (status == PMPD_OK)
            status = stream_pad(f, at + s->size, writing, err);
        at = pmpd_build_align(at + s->size);
    }
    if (status == PMPD_OK) {
        pmpd_build_put_header(b, head, total);
        pmpd_build_seal_header(head, directory_end);
        if (fseek(f, 0, SEEK_SET) != 0 || fwrite(head, 1, (size_t)directory_end, f) != directory_end ||
            fflush(f) != 0) {
            *writing = 1;
            status = pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write the container's directory: %s",
                                    strerror(errno));
        }
    }
    if (status == PMPD_OK)
        *size = total;
    free(head);
    free(types);
    free(sizes);
    return status;
}

#undef STREAM_CHUNK_BYTES
