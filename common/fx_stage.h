/*
 * fx_stage.h — the stage descriptor: what one stage can do and how to run it.
 *
 * Each stage folder builds a static library that defines one `const fx_stage`
 * (in its stage.c) and an executable: common/fx_main.c linked with this stage's
 * library and those of the stages it checks against (DESIGN.md, "Stage map").
 * The harness refuses a problem outside `caps` (exit 2, naming the limit) before
 * it calls the stage, so entry points may assume a problem their caps cover.
 */
#ifndef FX_STAGE_H
#define FX_STAGE_H

#include <cuda_runtime_api.h>

#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FX_MAX_HEAD_DIMS 8        /* the most head_dims an explicit caps list holds */
#define FX_MAX_HEAD_DIM_V_PAIRS 4 /* the most (head_dim, head_dim_v) pairs a caps lists */

/* A head_dim_v other than head_dim that a stage takes at this head_dim (fx_problem.h). */
typedef struct fx_head_dim_pair {
    int head_dim, head_dim_v;
} fx_head_dim_pair;

/* The most dynamic shared memory one CTA may opt in to (CUDA C++ Programming Guide,
 * "Technical Specifications per Compute Capability"): 227 KiB on sm_90, 163 KiB on sm_80. */
#define FX_SMEM_PER_BLOCK_OPTIN_SM90 (227 * 1024)
#define FX_SMEM_PER_BLOCK_OPTIN_SM80 (163 * 1024)

typedef struct fx_caps {
    /* head_dim: either an explicit list (n_head_dims > 0) or, when n_head_dims == 0,
     * any multiple of head_dim_multiple in [head_dim_multiple, head_dim_max]. */
    int head_dims[FX_MAX_HEAD_DIMS];
    int n_head_dims;
    int head_dim_multiple;
    int head_dim_max;
    /* head_dim_v != head_dim: only these pairs (each head_dim also in the head_dim caps),
     * forward only; none (n_head_dim_v_pairs == 0): head_dim_v must be head_dim. */
    fx_head_dim_pair head_dim_v_pairs[FX_MAX_HEAD_DIM_V_PAIRS];
    int n_head_dim_v_pairs;
    unsigned dtypes;             /* FX_DTYPE_BIT(FX_BF16) | ... */
    bool causal;                 /* supports causal (bottom-right) masking */
    bool gqa;                    /* supports heads_q != heads_kv */
    bool varlen;                 /* takes a variable-length batch (fx_problem.h, p->varlen) */
    bool backward;               /* has a backward entry point */
    bool deterministic_backward; /* backward outputs are bitwise repeatable (no atomics) */
    int min_sm;                  /* minimum compute capability ×10 (80 = sm_80) */
    bool sm90a_only;             /* built only for sm_90a: runs on compute capability 9.0 exactly */
    const char *limits;          /* other limits in words, printed by --help, or NULL */
} fx_caps;

/* Device buffers of one forward call. Shapes and layouts: fx_problem.h. */
typedef struct fx_fwd_args {
    const fx_problem *p;
    const void *q, *k, *v; /* dtype p->dtype */
    void *o;               /* dtype p->dtype */
    float *lse;            /* [batch, heads_q, seqlen_q] ([heads_q, total_q] varlen), natural log */
    fx_layout q_layout, k_layout, v_layout, o_layout;
    /* Device copies of p->cu_seqlens_q/k (batch + 1 ints) and p->seqused_k (batch ints) when
     * p->varlen (seqused_k NULL when p->seqused_k is); all NULL for a fixed-length batch. */
    const int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
    void *workspace; /* >= stage->workspace_bytes(p, false) bytes, 256-byte aligned */
    size_t workspace_bytes;
    cudaStream_t stream;
    /* dtype e4m3 (stage 10; fx_fp8_case.c fills them, NULL and 0 otherwise): q, k, v hold
     * e4m3 codes (v as Vᵀ [batch, heads_kv, head_dim, seqlen_k] when p->fp8_v_transposed;
     * v_layout then unused), o is bf16, and these are the fp32 descales [batch, heads,
     * n_blocks] of fx_fp8.h's fx_fp8_tensor, blocks of fp8_block_m rows of Q and
     * fp8_block_n rows of K and V: the kernel's tiles, which it checks. */
    const float *q_descale, *k_descale, *v_descale;
    int fp8_block_m, fp8_block_n;
} fx_fwd_args;

/* Device buffers of one backward call. dO and dQ have O's and Q's layouts, dK/dV
 * K's and V's. */
typedef struct fx_bwd_args {
    const fx_problem *p;
    const void *q, *k, *v, *o, *dout; /* dtype p->dtype; o and lse from this stage's forward */
    const float *lse;
    void *dq, *dk, *dv; /* dtype p->dtype */
    fx_layout q_layout, k_layout, v_layout, o_layout;
    void *workspace; /* >= stage->workspace_bytes(p, true) bytes */
    size_t workspace_bytes;
    cudaStream_t stream;
} fx_bwd_args;

/* A CPU model of a stage's algorithm (plain C, fp32), on whole host tensors
 * in the contiguous layouts of fx_problem.h, inputs already rounded to p->dtype. */
typedef struct fx_cpu_model {
    void (*forward)(const fx_problem *p, const float *q, const float *k, const float *v, float *o,
                    float *lse);
    void (*backward)(const fx_problem *p, const float *q, const float *k, const float *v,
                     const float *o, const float *lse, const float *dout, float *dq, float *dk,
                     float *dv); /* may be NULL */
} fx_cpu_model;

typedef struct fx_stage {
    const char *id;      /* "02_flash1": the folder name */
    const char *summary; /* one line: what the stage adds */
    fx_caps caps;
    /* Device workspace the stage needs for p (0 if none). The harness allocates it once
     * and names the bytes if the allocation fails. May be NULL (no workspace). */
    size_t (*workspace_bytes)(const fx_problem *p, bool backward);
    /* Stage-specific refusal beyond caps: 0; 2 with a message naming the limit in `why`
     * (the problem is outside what the stage does); or FX_EXIT_NO_GPU (77), also with a
     * message, when this GPU lacks what the problem needs (shared memory per block: the
     * same problem runs on a larger GPU, so it is a skip, not a usage error). May be NULL.
     * Runs before the device is opened and in --cpu runs too, so where it asks the device
     * and there is none it returns 0 (fx_device_open then reports the missing GPU). */
    int (*check_problem)(const fx_problem *p, bool backward, char *why, size_t why_len);
    /* Enqueue the forward on a->stream; return the launch error (cudaGetLastError). */
    cudaError_t (*forward)(const fx_fwd_args *a);
    cudaError_t (*backward)(const fx_bwd_args *a); /* NULL when !caps.backward */
    const fx_cpu_model *cpu_model;                 /* NULL if the stage has none */
    /* dtype e4m3 (stage 10): the kernel's tile at head_dim, kBlockM × kBlockN, which the
     * harness quantizes Q and K/V in blocks of (per-block descales must not straddle a
     * tile). NULL in the stages without e4m3. */
    fx_fp8_tiles (*fp8_tiles)(int head_dim);
    /* --self-test: the stage's GPU test of one device part alone, on the device that the
     * harness opened (stage 10: the in-kernel V transpose, byte for byte). Prints what it
     * checked; returns 0 (pass) or 1 (a wrong result or a CUDA error). NULL: none. */
    int (*self_test)(void);
} fx_stage;

/* The names of the stage being compiled. cmake/fx_stage.cmake defines FX_STAGE_ID
 * (08_intra_wg_overlap) and FX_STAGE_NUM (08) for each stage's sources, so that the same
 * line declares this stage's entry points in every stage's stage.c and fwd.cu while the
 * symbols differ, as they must (a program links several stages):
 *   FX_ENTRY(fwd)         fx_fwd_08, the forward (fx_fwd_args)
 *   FX_ENTRY(fwd_smem_bytes), FX_ENTRY(bwd), ...   likewise fx_<name>_08
 *   FX_STAGE_DESCRIPTOR   fx_stage_08_intra_wg_overlap, the descriptor the program lists
 *   FX_STAGE_ID_STRING    "08_intra_wg_overlap" */
#define FX_PASTE_(a, b) a##b
#define FX_PASTE(a, b) FX_PASTE_(a, b)
#define FX_STRING_(x) #x
#define FX_STRING(x) FX_STRING_(x)
#ifdef FX_STAGE_NUM
#define FX_ENTRY(name) FX_PASTE(FX_PASTE(fx_, name), FX_PASTE(_, FX_STAGE_NUM))
#define FX_STAGE_DESCRIPTOR FX_PASTE(fx_stage_, FX_STAGE_ID)
#define FX_STAGE_ID_STRING FX_STRING(FX_STAGE_ID)
#endif

/* 0 when the stage's caps cover p (head_dim, head_dim_v, dtype, causal, GQA, a
 * variable-length batch, backward if asked) and its check_problem accepts it; else 2 with
 * the limit named in `why`, or check_problem's FX_EXIT_NO_GPU (77) when this GPU lacks the
 * resources, e.g. "head_dim 80 is not supported (head_dim: 64/96/128/256)", "head_dim_v 128
 * with head_dim 192 is not supported (head_dim_v: head_dim only)"; a varlen batch on a stage
 * without caps.varlen: "a variable-length batch (--seqlens-q) is not supported". Messages
 * here and from every check_problem name no stage: the program's prefix names its own
 * (fx_msg.h), and the previous-stage line names the stage it is about. The GPU's
 * architecture (min_sm, sm90a_only) is fx_device_open's check. */
int fx_stage_supports(const fx_stage *s, const fx_problem *p, bool backward, char *why,
                      size_t why_len);

/* The grid of stages 03-08 is (query blocks, heads_q, batch), and gridDim.y and gridDim.z
 * stop at FX_MAX_GRID_YZ. Returns 0 when heads_q and batch fit, else 2 with the message
 * "heads_q (...) and batch (...) must each be at most 65535: the grid is one CTA per (query
 * block, head, batch) (gridDim.y/z)" in `why`. Needs no GPU. */
#define FX_MAX_GRID_YZ 65535
int fx_check_grid_heads_batch(const fx_problem *p, char *why, size_t why_len);

/* Returns FX_EXIT_NO_GPU (77, "no suitable GPU") with a message naming the bytes when one
 * block needs more dynamic shared memory (`needed` bytes, for `what` at this head_dim)
 * than the current GPU allows a block to opt in to
 * (cudaDevAttrMaxSharedMemoryPerBlockOptin), else 0. With no device to ask it returns 0:
 * opening the device reports that (exit 77) on its own. */
int fx_check_smem_optin(size_t needed, int head_dim, const char *what, char *why, size_t why_len);

/* The refusals every one-CTA-per-tile Hopper forward (stages 04-08) makes beyond its caps:
 * fx_check_grid_heads_batch, then fx_check_smem_optin for `smem_bytes` per CTA (Q and the
 * K/V ring). 0, 2 or 77 with the reason in `why`, as those two. Needs no GPU. */
int fx_check_hopper_fwd(const fx_problem *p, size_t smem_bytes, char *why, size_t why_len);

/* The capabilities every Hopper forward stage of 04-08 has: head_dim 64/128/256 (whole
 * 64-column slabs: one 128B-swizzled TMA box each, and from stage 05 one wgmma atom), bf16
 * and fp16, causal, GQA/MQA, fixed-length batches, no backward (stage 03 has the FA2 one,
 * stage 11 will have Hopper's), sm_90a only (the stages are built for it: TMA from 04, wgmma
 * and setmaxnreg from 05 exist only there). LIMITS: the stage's other limits in words, for
 * --help. Stage 09 adds head_dim 96 and 192 and variable-length batches (its stage.c). */
#define FX_HOPPER_FWD_CAPS(LIMITS)                                                                 \
    {                                                                                              \
        .head_dims = {64, 128, 256}, .n_head_dims = 3,                                             \
        .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16), .causal = true, .gqa = true,      \
        .varlen = false, .backward = false, .deterministic_backward = false, .min_sm = 90,         \
        .sm90a_only = true, .limits = (LIMITS),                                                    \
    }

/* The settings a stage reads from its environment (FX_ABLATION; stage 09's FX_SCHEDULER and
 * FX_SCHED_ORDER): the index in values[0 .. n) of the value of the variable `name`, or
 * `unset` when it is unset or empty. Any other value is -1, with the message
 * `NAME="value" is not a, b or c` in `why` (the value as fx_quote_value writes it), so that
 * a typo is refused (exit 2 from check_problem) instead of measuring the default. */
int fx_env_choice(const char *name, const char *const *values, int n, int unset, char *why,
                  size_t why_len);

/* A value from the user (an environment variable's) for a message: in double quotes, cut
 * after FX_QUOTE_MAX bytes (at a UTF-8 character's start) with "…" before the closing quote,
 * control bytes and '"' written as '?'. Into buf (len bytes, truncated to fit). */
#define FX_QUOTE_MAX 32
void fx_quote_value(const char *v, char *buf, size_t len);

/* Writes the capabilities into buf (len bytes, truncated to fit) as --help prints them,
 * one "  key:      value" line each ("  varlen:   yes (--seqlens-q)" or "no" among them);
 * scripts/gen_readme_stages.sh parses those lines. */
void fx_caps_describe(const fx_stage *s, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
