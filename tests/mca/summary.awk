# Turns llvm-mca's report on the regions of tests/mca/*_regions.c into one line per
# region: cycles per iteration, per 32 weights, and weight bytes per cycle
# (the region name is kernel/weights/bytes).
/Code Region - / { split($NF, f, "/"); name = f[1]; weights = f[2]; bytes = f[3] }
/^Iterations:/ { iterations = $2 }
/^Total Cycles:/ {
    cycles = $3 / iterations
    printf "  %-12s %7.1f cycles/iteration %6.2f cycles/32 weights %6.2f weight bytes/cycle\n", name, cycles,
           cycles * 32 / weights, bytes / cycles
}
