#!/usr/bin/env bash
# fake_stage.sh — a stand-in for a stage program (build/bin/stage_<id>) for
# bench/selftest.sh: the flags bench/sweep.sh passes, a --help with the capabilities
# lines it reads, a CSV row in FX_CSV_HEADER's columns and the "time fwd:" line. Its id
# is FAKE_ID, else its file name's (stage_<id>). Environment, set in a wrapper per program:
#   FAKE_BWD=1        capabilities say "backward: yes" and --bwd writes a bwd row
#   FAKE_NO_SPIN=1    built before --spin-us: --help does not list it, and it refuses it
#   FAKE_OLD_HEADER=1 writes an older CSV header (columns in another order, one missing)
#   FAKE_REFUSE_HD=D  exits 2 at head_dim D (outside its capabilities)
#   FAKE_RATE=T       TFLOP/s it reports (default 300)
#   FAKE_NOGPU=1      exits 77 as without a GPU (not with --cpu, which runs its "CPU model")
#   FAKE_NO_CPU=1     has no CPU model: --cpu refuses (exit 2)
# As the stage programs do, it refuses (exit 2) --bwd without a backward, and --bwd with
# --scale above 8 (the backward's limit), before it looks for a GPU.
#   FAKE_COMMIT=C     the commit its rows record (default fake0000)
#   FAKE_VARLEN=1|0   --help says "varlen: yes" (it takes --seqlens-q, --seqlens-k,
#                     --seqused-k and writes a varlen row: batch = the count, seqlen_q/k the
#                     largest lengths, FLOPs summed per sequence) or "varlen: no" (it refuses
#                     --seqlens-q, exit 2); unset: no varlen line and no such options (a
#                     build from before the varlen harness)
#   FAKE_SLEEP_S=S    sleeps S seconds before it times (a run that a timeout cuts short)
#   FAKE_DTYPES=L     its --help's "dtype:" line (e.g. e4m3, as stage 10's; bf16/fp16);
#                     any other --dtype is refused (exit 2) as the harness refuses it. Unset:
#                     no dtype line, every dtype taken (a build before the line existed)
#   FAKE_NEEDS_VT=1   e4m3 refused without --fp8-vt (exit 2): a stage that takes V
#                     transposed only, as stage 10 did before its in-kernel transpose (it
#                     takes both layouts now), to test how a refused layout is reported.
set -euo pipefail
id=${FAKE_ID:-${0##*/stage_}}
header="stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"
header+="heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,err_ref_max,"
header+="err_prev_max,prev_stage,check,head_dim_v"
old_header="direction,stage,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"
old_header+="heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,err_ref_max,"
old_header+="prev_stage,check"
batch=1 seqlen=128 heads=1 hd=64 dtype=bf16 causal=0 bench=0 bwd=0 csv="" iters=10 spin=""
cpu=0 scale="" lq="" lk="" used="" vt=0
while (($#)); do
    case $1 in
        --help)
            echo "usage: stage_$id [options] (stand-in)"
            [[ -n ${FAKE_NO_SPIN:-} ]] ||
                echo "  --spin-us N  keep the GPU busy N us before each timed call (20)"
            echo "capabilities:"
            echo "  head_dim: 64 128 256"
            [[ -z ${FAKE_DTYPES:-} ]] || echo "  dtype:    $FAKE_DTYPES"
            case ${FAKE_VARLEN:-} in
                1) echo "  varlen:   yes (--seqlens-q, --seqlens-k, --seqused-k)" ;;
                0) echo "  varlen:   no" ;;
            esac
            echo "  backward: $([[ -n ${FAKE_BWD:-} ]] && echo yes || echo no)"
            exit 0 ;;
        --batch) batch=$2; shift ;;
        --seqlen) seqlen=$2; shift ;;
        --heads) heads=$2; shift ;;
        --head-dim) hd=$2; shift ;;
        --dtype) dtype=$2; shift ;;
        --causal) causal=1 ;;
        --fp8-vt) vt=1 ;;
        --hadamard) ;;
        --fp8-scaling) shift ;;
        --bench) bench=1 ;;
        --bwd) bwd=1 ;;
        --check) ;;
        --cpu) cpu=1 ;;
        --scale) scale=$2; shift ;;
        --csv) csv=$2; shift ;;
        --seqlens-q | --seqlens-k | --seqused-k)
            [[ -n ${FAKE_VARLEN:-} ]] || { echo "stage_$id: unknown option '$1'" >&2; exit 2; }
            case $1 in
                --seqlens-q) lq=$2 ;;
                --seqlens-k) lk=$2 ;;
                *) used=$2 ;;
            esac
            shift ;;
        --iters) iters=$2; shift ;;
        --warmup) shift ;;
        --spin-us)
            if [[ -n ${FAKE_NO_SPIN:-} ]]; then
                echo "stage_$id: unknown option '--spin-us'" >&2
                exit 2
            fi
            spin=$2; shift ;;
        *) echo "stage_$id: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
if ((bwd)) && [[ -z ${FAKE_BWD:-} ]]; then echo "stage_$id: there is no backward" >&2; exit 2; fi
if [[ -n ${FAKE_DTYPES:-} && /$FAKE_DTYPES/ != */$dtype/* ]]; then
    echo "stage_$id: dtype $dtype is not supported" >&2
    exit 2
fi
if [[ -n ${FAKE_NEEDS_VT:-} && $dtype == e4m3 ]] && ((!vt)); then
    echo "stage_$id: V in K's layout is not taken by this stand-in:" \
        "give --fp8-vt (V transposed)" >&2
    exit 2
fi
if ((bwd)) && [[ -n $scale ]] && awk -v s="$scale" 'BEGIN { exit !(s > 8) }'; then
    echo "stage_$id: the backward takes softmax_scale up to 8 (got $scale) (stand-in)" >&2
    exit 2
fi
if [[ -n $lq && ${FAKE_VARLEN:-} != 1 ]]; then
    echo "stage_$id: a variable-length batch (--seqlens-q) is not supported (stand-in)" >&2
    exit 2
fi
if ((cpu)); then
    if [[ -n ${FAKE_NO_CPU:-} ]]; then
        echo "stage_$id: --cpu runs a stage's CPU model, and this stage has none (stand-in)" >&2
        exit 2
    fi
    echo "$id cpu model $( ((bwd)) && echo fwd+bwd || echo fwd): (stand-in) dtype $dtype"
    echo "  PASS"
    exit 0
fi
if [[ -n ${FAKE_NOGPU:-} ]]; then echo "stage $id: skipped: no CUDA device (stand-in)"; exit 77; fi
if [[ -n ${FAKE_REFUSE_HD:-} && $hd == "$FAKE_REFUSE_HD" ]]; then
    echo "stage $id: head_dim $hd is outside its capabilities (64, 128)" >&2
    exit 2
fi
((bench)) || exit 0
[[ -z ${FAKE_SLEEP_S:-} ]] || sleep "$FAKE_SLEEP_S"
rate=${FAKE_RATE:-300}
# A varlen batch: the count, the largest lengths, and its FLOPs summed per sequence.
varlen_flops=""
if [[ -n $lq ]]; then
    read -r batch seqlen seqlen_k varlen_flops < <(awk -v q="$lq" -v k="${lk:-$lq}" \
        -v u="$used" -v h="$heads" -v d="$hd" -v c="$causal" 'BEGIN {
            n = split(q, Q, ","); split(k, K, ","); if (u != "") split(u, K, ",")
            for (b = 1; b <= n; ++b) {
                sq = Q[b] + 0; sk = K[b] + 0
                if (sq > mq) mq = sq
                if (sk > mk) mk = sk
                if (!c) p = sq * sk
                else { i0 = sq > sk ? sq - sk : 0; p = (sq - i0) * (i0 + sk + 1 - sq + sk) / 2 }
                f += 4 * h * d * p
            }
            printf "%d %d %d %.0f\n", n, mq, mk, f }')
fi
row() {  # row DIRECTION FACTOR
    local flops ms
    flops=$(awk -v b="$batch" -v h="$heads" -v d="$hd" -v s="$seqlen" -v c="$causal" -v f="$2" \
        'BEGIN { p = c ? s * (s + 1) / 2 : s * s; printf "%.0f", f * 4 * b * h * d * p }')
    [[ -z $varlen_flops ]] ||
        flops=$(awk -v v="$varlen_flops" -v f="$2" 'BEGIN { printf "%.0f", v * f }')
    ms=$(awk -v f="$flops" -v r="$rate" -v j="${RANDOM}" \
        'BEGIN { printf "%.5f", f / (r * 1e12) * 1e3 * (1 + j / 3276800) }')
    local tf
    tf=$(awk -v f="$flops" -v m="$ms" 'BEGIN { printf "%.2f", f / (m * 1e-3) / 1e12 }')
    echo "  time $1: $ms ms (min $ms, max $ms, $iters repeats)" \
        " $(awk -v t="$tf" 'BEGIN { printf "%.1f", t }') TFLOP/s" \
        " SM 1980 MHz${spin:+ (spin $spin us)}"
    [[ -n $csv ]] || return 0
    if [[ ! -s $csv ]]; then
        if [[ -n ${FAKE_OLD_HEADER:-} ]]; then
            echo "$old_header" >>"$csv"
        else
            echo "$header" >>"$csv"
        fi
    fi
    local commit=${FAKE_COMMIT:-fake0000} line
    if [[ -n ${FAKE_OLD_HEADER:-} ]]; then
        line="$1,$id,NVIDIA H200,132,1980,$commit,2026-12-01T00:00:00Z,$batch,$seqlen,$seqlen,"
        line+="$heads,$heads,$hd,$dtype,$causal,$iters,$ms,$ms,$ms,$tf,,,skipped"
    else
        line="$id,$1,NVIDIA H200,132,1980,$commit,2026-12-01T00:00:00Z,$batch,$seqlen,"
        line+="${seqlen_k:-$seqlen},"
        line+="$heads,$heads,$hd,$dtype,$causal,$iters,$ms,$ms,$ms,$tf,,,,skipped,$hd"
    fi
    echo "$line" >>"$csv"
}
echo "stage $id fwd${bwd:+}: batch $batch seqlen $seqlen heads $heads head_dim $hd (stand-in)"
row fwd 1
if ((bwd)) && [[ -n ${FAKE_BWD:-} ]]; then row bwd 2.5; fi
