/*
 * fx_api.h — the C API of libflash_explorer.so: every stage callable from another program
 * (and from Python: python/flash_explorer/, through ctypes). docs/api.md shows its use.
 *
 * The library holds every stage of stages/ (their static libraries and common/), lists
 * them with their capabilities, checks a problem against a stage's capabilities with the
 * message its program prints, and runs a stage's forward (and backward, where it has one)
 * on device buffers that the caller owns, on the caller's stream and current device.
 *
 * Shapes and layouts are the harness's (common/fx_problem.h, DESIGN.md "Layout"):
 *   Q, dQ        : [batch, seqlen_q, heads_q,  head_dim]    strides in elements, last dim 1
 *   O, dO        : [batch, seqlen_q, heads_q,  head_dim_v]  head_dim_v: V's columns, head_dim
 *   K, dK        : [batch, seqlen_k, heads_kv, head_dim]    unless the stage lists the pair
 *   V, dV        : [batch, seqlen_k, heads_kv, head_dim_v]  (fx_api_caps.head_dim_v_pairs)
 *   LSE          : fp32 [batch, heads_q, seqlen_q], contiguous, natural log
 * A variable-length batch packs the sequences along the rows (FlashAttention's varlen
 * layout): Q, O [total_q, heads_q, head_dim], K, V [total_k, heads_kv, head_dim], LSE
 * fp32 [heads_q, total_q]; the batch strides are then unused (fx_problem.h says more).
 * Causal masking is bottom-right aligned; a row that sees no key gets O = 0, LSE = -inf.
 *
 * Errors: every function that can fail returns an fx_api_status and writes one message
 * (NUL-terminated, truncated to msg_len bytes; msg may be NULL when msg_len is 0). The
 * messages are the stage programs' lines, "stage_<id>: <reason>" (common/fx_msg.h), so a
 * refusal reads as the program's for the same problem. The library never aborts or exits
 * and prints nothing: what a stage's launcher would print goes into msg.
 *
 * Plain C11, no CUDA header needed: a stream is a void * (cudaStream_t; NULL the default
 * stream). The API keeps no state between calls; calls from several threads at once are
 * not yet tested.
 *
 * The GPU path is tested through the Python binding (tests/python/test_gpu.py: bitwise
 * against the stage programs, and against PyTorch); without a GPU fx_api_forward and
 * fx_api_backward return FX_API_NO_GPU (tests/api/test_api.c).
 */
#ifndef FX_API_H
#define FX_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface: the structs below and the functions' signatures.
 * python/flash_explorer checks it before it uses the structs. */
#define FX_API_VERSION 2 /* 2: head_dim_v (fx_api_problem), head_dim_v_pairs (fx_api_caps) */

/* Return codes: the stage programs' exit codes (DESIGN.md, "Program"). */
typedef enum fx_api_status {
    FX_API_OK = 0,
    FX_API_ERROR = 1,   /* a CUDA error (launch, allocation) or another failure     */
    FX_API_USAGE = 2,   /* bad arguments, or a problem outside the stage's caps      */
    FX_API_NO_GPU = 77, /* no driver, no device, an architecture below the stage's,
                           or less shared memory than the problem needs                */
} fx_api_status;

/* dtype codes (common/fx_problem.h's fx_dtype). */
enum { FX_API_BF16 = 0, FX_API_FP16 = 1 };
/* fx_api_caps.dtypes bit of a dtype code. */
#define FX_API_DTYPE_BIT(dt) (1u << (unsigned)(dt))

#define FX_API_MAX_HEAD_DIMS 8
#define FX_API_MAX_HEAD_DIM_V_PAIRS 4

/* A stage's capabilities (common/fx_stage.h's fx_caps). Flags are 0 or 1. */
typedef struct fx_api_caps {
    const char *id;      /* "08_intra_wg_overlap": the folder name; static storage */
    const char *summary; /* one line: what the stage adds; static storage */
    /* head_dim: the list head_dims[0 .. n_head_dims) when n_head_dims > 0, else every
     * multiple of head_dim_multiple up to head_dim_max. */
    int head_dims[FX_API_MAX_HEAD_DIMS];
    int n_head_dims;
    int head_dim_multiple;
    int head_dim_max;
    unsigned dtypes; /* FX_API_DTYPE_BIT(FX_API_BF16) | ... */
    int causal;      /* bottom-right causal masking */
    int gqa;         /* heads_q a multiple of heads_kv, != */
    int varlen;      /* variable-length batches */
    int backward;    /* fx_api_backward runs */
    int deterministic_backward;
    int min_sm;         /* minimum compute capability ×10 */
    int sm90a_only;     /* runs on compute capability 9.0 only */
    const char *limits; /* other limits in words (the program's --help), or NULL */
    /* head_dim_v != head_dim (forward only): the pairs {head_dim, head_dim_v} the stage
     * takes, n_head_dim_v_pairs of them; 0 pairs: head_dim_v must equal head_dim. */
    int head_dim_v_pairs[FX_API_MAX_HEAD_DIM_V_PAIRS][2];
    int n_head_dim_v_pairs;
} fx_api_caps;

/* One attention problem (common/fx_problem.h's fx_problem). */
typedef struct fx_api_problem {
    int batch;             /* >= 1; varlen: the number of sequences */
    int seqlen_q;          /* varlen: the longest sequence's query rows (max_seqlen_q) */
    int seqlen_k;          /* varlen: the longest sequence's keys (max_seqlen_k) */
    int heads_q, heads_kv; /* heads_q a multiple of heads_kv */
    int head_dim;          /* multiple of 8 in [8, 256], and one the stage lists */
    int dtype;             /* FX_API_BF16 or FX_API_FP16: Q, K, V, O, dO, dQ, dK, dV */
    int causal;            /* 0 or 1 */
    double softmax_scale;  /* <= 0: 1/sqrt(head_dim) */
    /* Variable-length batch (stages with caps.varlen): varlen 1, total_q, total_k the
     * packed rows, cu_seqlens_q/k (batch + 1 ints, 0 first, non-decreasing, last the
     * total) and seqused_k (batch ints or NULL) in HOST memory; fx_api_fwd_args carries
     * their device copies. varlen 0: all zero / NULL. */
    int varlen;
    int total_q, total_k;
    const int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
    /* V's and O's columns (version 2): 0 or head_dim for head_dim, else a pair the stage's
     * caps list (e.g. 192 with 128 on stage 09), forward only. */
    int head_dim_v;
} fx_api_problem;

/* Element strides of one tensor (fx_layout); the head_dim stride is 1. */
typedef struct fx_api_layout {
    int64_t batch_stride, row_stride, head_stride;
} fx_api_layout;

/* The device buffers of one forward call; every pointer on the current device. */
typedef struct fx_api_fwd_args {
    const void *q, *k, *v; /* inputs, dtype p->dtype */
    void *o;               /* output, dtype p->dtype, O's layout */
    float *lse;            /* output, fp32 LSE (layout above); required */
    fx_api_layout q_layout, k_layout, v_layout, o_layout;
    /* Varlen only: device copies of p->cu_seqlens_q/k and p->seqused_k (NULL when that is). */
    const int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
    /* Device workspace, 256-byte aligned, at least fx_api_workspace_bytes(..., 0); NULL: the
     * library allocates what the call needs on `stream` (cudaMallocAsync) and frees it
     * there after the call's kernels (cudaFreeAsync). */
    void *workspace;
    size_t workspace_bytes;
    void *stream; /* cudaStream_t; NULL: the default stream */
} fx_api_fwd_args;

/* The device buffers of one backward call: o and lse from the same stage's forward on the
 * same inputs; dout, dq have O's and Q's layouts, dk, dv K's and V's. Fixed-length
 * batches only (no stage has a varlen backward). */
typedef struct fx_api_bwd_args {
    const void *q, *k, *v, *o, *dout; /* dtype p->dtype */
    const float *lse;
    void *dq, *dk, *dv; /* outputs, dtype p->dtype */
    fx_api_layout q_layout, k_layout, v_layout, o_layout;
    void *workspace; /* as fx_api_fwd_args's, at least fx_api_workspace_bytes(..., 1) */
    size_t workspace_bytes;
    void *stream;
} fx_api_bwd_args;

/* FX_API_VERSION of the library that was loaded. */
int fx_api_version(void);

/* The number of stages the library holds (10 today: 01_naive .. 10_fp8; 10_fp8 takes e4m3,
 * whose descales this interface does not pass yet, so its calls are refused). */
int fx_api_stage_count(void);

/* The id of stage `index` (0 .. fx_api_stage_count() - 1, reading order), static storage,
 * or NULL outside that range. */
const char *fx_api_stage_id(int index);

/* Fills *caps with stage `stage`'s capabilities (stage: an id, "08_intra_wg_overlap").
 * FX_API_USAGE with "flash-explorer: no stage '<stage>' (stages: 01_naive, ...)" for an
 * unknown id. */
int fx_api_stage_caps(const char *stage, fx_api_caps *caps, char *msg, size_t msg_len);

/* Checks p (with a backward when `backward` is 1) as the stage's program checks its options,
 * on the CPU: fx_problem_validate, then the caps and the stage's own refusals
 * (fx_stage_supports). FX_API_OK; FX_API_USAGE with the program's message, e.g.
 *   "stage_08_intra_wg_overlap: head_dim 80 is not supported (head_dim: 64/128/256)"
 *   "stage_08_intra_wg_overlap: a variable-length batch (--seqlens-q) is not supported"
 *   "stage_03_flash2: dtype (7) is not bf16, fp16 or e4m3"
 * or FX_API_NO_GPU where the current GPU has too little shared memory for it (with no GPU
 * that check passes: running reports the missing GPU). */
int fx_api_check(const char *stage, const fx_api_problem *p, int backward, char *msg,
                 size_t msg_len);

/* The forward's (backward 0) or backward's (1) device workspace in bytes for p, into *bytes
 * (0: none). Fails as fx_api_check. */
int fx_api_workspace_bytes(const char *stage, const fx_api_problem *p, int backward, size_t *bytes,
                           char *msg, size_t msg_len);

/* Enqueues the stage's forward on a->stream: O and LSE from Q, K, V. Checks first, each a
 * refusal before anything runs: p as fx_api_check; a NULL buffer; a base address not
 * 16-byte aligned or a stride (batch, row, head) negative or not a multiple of 16 bytes
 * (every stage reads rows as 16-byte vectors, the Hopper stages through TMA); a stride
 * of 0 over more than one element (an expanded tensor), or strides that put an element
 * past offset 2^31 - 1 (the stages index in 32 bits); then the current device as the
 * program does (FX_API_NO_GPU with "stage_<id>: no usable GPU: no CUDA device" and the
 * like). Returns FX_API_OK once the kernels are enqueued (the call does not synchronize,
 * except where it allocates a workspace: cudaMallocAsync); FX_API_ERROR with the CUDA
 * error of the launch. */
int fx_api_forward(const char *stage, const fx_api_problem *p, const fx_api_fwd_args *a, char *msg,
                   size_t msg_len);

/* Enqueues the stage's backward on a->stream: dQ, dK, dV from Q, K, V, O, LSE, dO. The
 * checks and returns of fx_api_forward; FX_API_USAGE "stage_<id>: there is no backward"
 * for a stage without one. */
int fx_api_backward(const char *stage, const fx_api_problem *p, const fx_api_bwd_args *a, char *msg,
                    size_t msg_len);

#ifdef __cplusplus
}
#endif
#endif
