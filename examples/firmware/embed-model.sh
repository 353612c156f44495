#!/bin/sh
# Writes a C file defining NAME (default firmware_model_blob: the bytes of
# the container given as $1, 64-byte aligned as the zero-copy loader needs)
# and NAME_size.  POSIX sh, od and awk only.
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] && [ -f "$1" ] || { echo "usage: embed-model.sh MODEL.pmpd [NAME]" >&2; exit 2; }
name=${2:-firmware_model_blob}
size=$(wc -c < "$1" | tr -d ' ')
echo '#include "model_blob.h"'
echo '#if defined(__GNUC__)'
echo '__attribute__((aligned(64)))'
echo '#endif'
echo "const unsigned char $name[] = {"
od -An -v -tu1 "$1" | awk '{ line = ""; for (i = 1; i <= NF; i++) line = line $i ","; print line }'
echo '};'
echo "const size_t ${name}_size = $size;"
