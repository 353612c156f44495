/* Reading a whole input file in the command-line tools (checkpoints,
 * tokenizers, texts). */
#ifndef PMPD_EXAMPLES_READ_FILE_H
#define PMPD_EXAMPLES_READ_FILE_H

#include <stddef.h>

/* The whole non-empty file at path in a malloc'ed buffer (free() it), one
 * NUL byte past its end so a text can be used as a C string; *size gets
 * the file's length.  NULL when it cannot be read or is empty. */
unsigned char *example_read_file(const char *path, size_t *size);

#endif
