#!/bin/sh
# Writes a C file defining firmware_model_blob (the bytes of the container
# given as $1, 64-byte aligned as the zero-copy loader needs) and its size.
# POSIX sh, od and awk only.
set -eu
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: embed-model.sh MODEL.pmpd" >&2; exit 2; }
size=$(wc -c < "$1" | tr -d ' ')
echo '#include "model_blob.h"'
echo '#if defined(__GNUC__)'
echo '__attribute__((aligned(64)))'
echo '#endif'
echo 'const unsigned char firmware_model_blob[] = {'
od -An -v -tu1 "$1" | awk '{ line = ""; for (i = 1; i <= NF; i++) line = line $i ","; print line }'
echo '};'
echo "const size_t firmware_model_blob_size = $size;"
