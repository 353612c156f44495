#include "examples/common/read_file.h"

#include <stdio.h>
#include <stdlib.h>

unsigned char *example_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    long length;
    *size = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (length = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (data = (unsigned char *)malloc((size_t)length + 1)) != NULL) {
        if (fread(data, 1, (size_t)length, f) == (size_t)length) {
            data[length] = 0;
            *size = (size_t)length;
        } else {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    return data;
}
