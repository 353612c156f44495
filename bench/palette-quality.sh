#!/bin/sh
# Quality of the bit allocation (pmpd-convert --budget-bits) beside the
# uniform formats it mixes, on the real checkpoints: next-token KL and top-1
# agreement against the f32 model, and perplexity, from pmpd-eval over the
# first 1024 tokens of a text.  Each budget is converted three times: with
# the measured sensitivities ("measured"), with --palette-flat (each group
# weighed by its share of the weights: what the sensitivities buy), both on
# the default palette q8,q4,q2cb, and with the measured sensitivities on
# q8,q4,q2cb,nuq2,nuq3,nuq4 ("nuq"); at FULL_BUDGETS also on q4, q2cb, nuq2,
# nuq3, vq2.5, tcq2, tcq2.5, tcq3 ("full", the eight formats of the first
# measurements; a palette now takes up to 16); at PALETTE16_BUDGETS on the
# sixteen formats of PALETTE16 with --palette-gaussian (the rotated
# formats' errors estimated on Gaussian rows: "palette16", about 3 minutes
# a budget on pycode21M); at LDLQ_BUDGETS on LDLQ_PALETTE with --ldlq 64
# (data-aware rounding against each layer input's moment over 64
# sequences the model writes itself, every candidate's error its output
# error: "ldlq").  The "tcq" row of docs/quality-vs-bits.csv is
# FULL_PALETTE=q4,tcq2,tcq2.5,tcq2.75,tcq3,tcq3.25,tcq3.5,tcq4 at 3.25
# bits, measured errors (25 minutes).
# Beside them every single format of the
# palette at each of its widths (q8, q4, q2cb, nuq2-4, vq2-4, tcq2-4 in
# half bits) and the nested (any-precision 2:4) model decoded at 2, 3
# and 4 bits.  bench/quality-plot.py draws the CSV as an SVG.
#
#   pycode21M: its held-out text pycode21M_val.txt.
#   stories260K: no held-out text is shared, so the f32 model writes one
#   (12 stories of up to 200 tokens, pmpd-run -t 1 --top-p 1 -s 1..12).
#
# Environment (all optional):
#   BUILD     build tree holding pmpd-convert, pmpd-eval, pmpd-run (default build)
#   MODELS    folder of the checkpoints (default ../shared/models)
#   BUDGETS   bits per weight to allocate (default "2.5 3.0 3.25 3.5 4.0 4.5 5.0")
#   FULL_BUDGETS  the budgets also allocated over the full palette
#             (default "2.5 3.25")
#   PALETTE16_BUDGETS  the budgets allocated over PALETTE16 with Gaussian
#             estimates (default "2.5 3.0 3.25 3.5 4.0")
#   LDLQ_BUDGETS  the budgets allocated with --ldlq 64 over LDLQ_PALETTE
#             (default "3.25"; LDLQ_PALETTE default
#             q4,nuq3,nuq4,tcq2.75,tcq3,tcq3.25,tcq3.5,tcq4)
#   MODELS_TO "stories260K pycode21M" (default both)
#   THREADS   sensitivity threads (default 2)
#
# Writes BUILD/palette-quality/quality.csv (and quality.svg where python3 is):
#   model,weights,bits_per_weight,predicted_kl,kl,top1,ppl
# (bits_per_weight over the layer matrices; embedding and classifier q8 in
# every row; predicted_kl is sum a_g * err_g, the flat rows' is their mean
# relative error; a nested row's bits are what a decode step at that width
# reads of the layer matrices, per layer weight).  About an hour on 2
# cores, most of it pycode21M's q2cb and TCQ encodings (the error of every
# candidate) and sensitivity runs.
set -eu
BUILD=${BUILD:-build}
MODELS=${MODELS:-../shared/models}
BUDGETS=${BUDGETS:-"2.5 3.0 3.25 3.5 4.0 4.5 5.0"}
FULL_BUDGETS=${FULL_BUDGETS:-"2.5 3.25"}
FULL_PALETTE=${FULL_PALETTE:-q4,q2cb,nuq2,nuq3,vq2.5,tcq2,tcq2.5,tcq3}
PALETTE16_BUDGETS=${PALETTE16_BUDGETS:-"2.5 3.0 3.25 3.5 4.0"}
LDLQ_BUDGETS=${LDLQ_BUDGETS:-"3.25"}
LDLQ_PALETTE=${LDLQ_PALETTE:-q4,nuq3,nuq4,tcq2.75,tcq3,tcq3.25,tcq3.5,tcq4}
PALETTE16=q8,q4,q2cb,nuq2,nuq3,nuq4,vq2.5,vq3,tcq2,tcq2.25,tcq2.5,tcq2.75,tcq3,tcq3.25,tcq3.5,tcq4
MODELS_TO=${MODELS_TO:-"stories260K pycode21M"}
THREADS=${THREADS:-2}
OUT=$BUILD/palette-quality
mkdir -p "$OUT"
CSV=$OUT/quality.csv
echo "model,weights,bits_per_weight,predicted_kl,kl,top1,ppl" > "$CSV"

# One allocated model's row: its report's bits and prediction, pmpd-eval's figures.
row() { # model label log eval
    bits=$(grep -h 'reached' "$3" 2>/dev/null | awk '{print $2}')
    pred=$(grep -h 'reached' "$3" 2>/dev/null | sed 's/.*increase \([0-9.e-]*\).*/\1/')
    line=$(tail -1 "$4")
    echo "$1,$2,${bits:-},${pred:-},$(echo "$line" | cut -d, -f6),$(echo "$line" | cut -d, -f7),$(echo "$line" | cut -d, -f4)" >> "$CSV"
}

for model in $MODELS_TO; do
    if [ "$model" = stories260K ]; then
        tok=$MODELS/tok512.bin
        text=$OUT/stories260K_text.txt
    else
        tok=$MODELS/llama2_tokenizer.bin
        text=$MODELS/pycode21M_val.txt
    fi
    ref=$OUT/${model}_f32.pmpd
    "$BUILD/pmpd-convert" "$MODELS/$model.bin" "$ref" --tokenizer "$tok" > /dev/null
    if [ "$model" = stories260K ]; then
        : > "$text"
        for s in 1 2 3 4 5 6 7 8 9 10 11 12; do
            "$BUILD/pmpd-run" "$ref" -n 200 -t 1.0 --top-p 1 -s $s 2>/dev/null >> "$text"
            echo >> "$text"
        done
    fi
    for b in $(echo $BUDGETS $PALETTE16_BUDGETS $LDLQ_BUDGETS | tr ' ' '\n' | sort -n -u); do
        hows=""
        case " $BUDGETS " in *" $b "*) hows="measured flat nuq" ;; esac
        case " $FULL_BUDGETS " in *" $b "*) hows="$hows full" ;; esac
        case " $PALETTE16_BUDGETS " in *" $b "*) hows="$hows palette16" ;; esac
        case " $LDLQ_BUDGETS " in *" $b "*) hows="$hows ldlq" ;; esac
        for how in $hows; do
            flag=""
            [ $how = flat ] && flag="--palette-flat"
            [ $how = nuq ] && flag="--palette q8,q4,q2cb,nuq2,nuq3,nuq4"
            [ $how = full ] && flag="--palette $FULL_PALETTE"
            [ $how = palette16 ] && flag="--palette $PALETTE16 --palette-gaussian"
            [ $how = ldlq ] && flag="--palette $LDLQ_PALETTE --ldlq 64"
            name=${model}_${how}_$b
            if "$BUILD/pmpd-convert" "$MODELS/$model.bin" "$OUT/$name.pmpd" --tokenizer "$tok" --budget-bits "$b" \
                --threads "$THREADS" $flag > "$OUT/$name.log" 2>&1; then
                "$BUILD/pmpd-eval" "$OUT/$name.pmpd" "$text" --ref "$ref" --tokens 1024 --csv > "$OUT/$name.eval" 2>/dev/null
                row "$model" "allocated $how $b" "$OUT/$name.log" "$OUT/$name.eval"
            else
                echo "$model,allocated $how $b,refused,,,," >> "$CSV"
            fi
        done
    done
    # Uniform formats, their layer bits from the summary: the type's bytes
    # (q8's less the vocabulary's, which every quantized model stores as q8)
    # over the layer weights the allocation reported.
    weights=$(sed -n 's/.* over \([0-9]*\) layer weights.*/\1/p' "$OUT/${model}"_measured_*.log \
              "$OUT/${model}"_flat_*.log 2>/dev/null | head -1)
    vocab=
    for t in q4 q2cb q8 nuq2 nuq3 nuq4 vq2 vq2.5 vq3 vq3.5 vq4 tcq2 tcq2.5 tcq3 tcq3.5 tcq4; do
        "$BUILD/pmpd-convert" "$MODELS/$model.bin" "$OUT/${model}_$t.pmpd" --tokenizer "$tok" --type $t \
            --threads "$THREADS" > "$OUT/${model}_$t.log"
        "$BUILD/pmpd-eval" "$OUT/${model}_$t.pmpd" "$text" --ref "$ref" --tokens 1024 --csv > "$OUT/${model}_$t.eval" 2>/dev/null
        case $t in nuq*) word=nuq ;; vq*) word=vq ;; tcq*) word=tcq ;; *) word=$t ;; esac
        bytes=$(grep "tensors $word " "$OUT/${model}_$t.log" | awk '{print $4}')
        [ -n "$vocab" ] || vocab=$(grep "tensors q8 " "$OUT/${model}_q4.log" | awk '{print $4}')
        [ $t = q8 ] && bytes=$((bytes - vocab))
        line=$(tail -1 "$OUT/${model}_$t.eval")
        echo "$model,uniform $t,$(awk -v b="$bytes" -v w="$weights" 'BEGIN { printf "%.4f", 8 * b / w }'),,$(echo "$line" | cut -d, -f6),$(echo "$line" | cut -d, -f7),$(echo "$line" | cut -d, -f4)" >> "$CSV"
    done
    # Nested weights (any-precision, seed 2 bits, parent 4), one file decoded at
    # each width (the decode kernels, as generation runs them); the bits are the
    # bytes a decode step at that width reads, less the vocabulary's.
    nested=$OUT/${model}_anyprec.pmpd
    "$BUILD/pmpd-convert" "$MODELS/$model.bin" "$nested" --tokenizer "$tok" --type anyprec --bits 2:4 \
        --threads "$THREADS" > "$OUT/${model}_anyprec.log"
    for k in 2 3 4; do
        "$BUILD/pmpd-eval" "$nested" "$text" --ref "$ref" --tokens 1024 --bits 4:$k --decode --csv \
            > "$OUT/${model}_anyprec$k.eval" 2>/dev/null
        bytes=$("$BUILD/pmpd-run" "$nested" --bits 4:$k -n 3 -t 0 --ignore-eos 2>&1 >/dev/null | sed -n 's/^weights: \([0-9]*\) bytes.*/\1/p')
        line=$(tail -1 "$OUT/${model}_anyprec$k.eval")
        echo "$model,nested $k,$(awk -v b="$bytes" -v v="$vocab" -v w="$weights" 'BEGIN { printf "%.4f", 8 * (b - v) / w }'),,$(echo "$line" | cut -d, -f6),$(echo "$line" | cut -d, -f7),$(echo "$line" | cut -d, -f4)" >> "$CSV"
    done
done
cat "$CSV"
if command -v python3 > /dev/null 2>&1; then
    python3 "$(dirname "$0")/quality-plot.py" "$CSV" "$OUT/quality.svg" && echo "plot: $OUT/quality.svg"
fi
