/* Standalone driver for the fuzz harnesses: runs LLVMFuzzerTestOneInput on
 * every regular file in the directories (or on the files) named on the
 * command line, or on standard input when there are no arguments (which is
 * what AFL++ feeds a program built from a harness and this file).  A missing
 * directory is skipped, so empty regression folders need not exist. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char *replay_read(FILE *f, size_t *size)
{
    size_t capacity = 4096, length = 0, got;
    unsigned char *data = (unsigned char *)malloc(capacity);
    while (data && (got = fread(data + length, 1, capacity - length, f)) > 0) {
        length += got;
        if (length == capacity) {
            unsigned char *grown = (unsigned char *)realloc(data, capacity * 2);
            if (!grown) {
                free(data);
                return NULL;
            }
            data = grown;
            capacity *= 2;
        }
    }
    *size = length;
    return data;
}

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    size_t size;
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    data = replay_read(f, &size);
    fclose(f);
    if (!data) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int i, failures = 0;
    unsigned long count = 0;
    if (argc < 2) {
        size_t size;
        unsigned char *data = replay_read(stdin, &size);
        if (!data)
            return 1;
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        return 0;
    }
    for (i = 1; i < argc; i++) {
        struct stat st;
        DIR *dir;
        struct dirent *entry;
        if (stat(argv[i], &st) != 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            failures += replay_file(argv[i]);
            count++;
            continue;
        }
        dir = opendir(argv[i]);
        if (!dir)
            continue;
        while ((entry = readdir(dir)) != NULL) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], entry->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                failures += replay_file(path);
                count++;
            }
        }
        closedir(dir);
    }
    printf("replay: %lu inputs\n", count);
    return failures != 0;
}
