/*
 * fx_splitkv.h — stage 12's split-KV forward and its combine on the CPU (flash-decoding), and
 * FA3's num_splits heuristic: the model the stage's kernels are written against, before them.
 *
 * Sources: Flash-Decoding (Dao, Haziza, Massa, Sizov, 2023 blog post: split K/V, attention
 * and LSE per split, a reduction by LSE weights); FA3's public hopper/ code as summarised in
 * shared/anchors/FA3_HOPPER_FACTS_2.md, part (c): the split ranges (block.h), the partials'
 * layout and the empty split (epilogue_fwd.hpp), the combine (flash_fwd_combine_kernel.h) and
 * num_splits_heuristic (heuristics.h, flash_api.cpp). Here, in common/, until stage 12 exists
 * (as stage 10's model waited in common/fx_fp8_model.h): a stages/ folder with a model and no
 * program would break run.sh and the scripts that take every stages/NN_* for a stage.
 *
 * The split. Query row i of (batch b, query head h) attends the keys j < fx_keys_seen(i) of
 * KV head h / (heads_q/heads_kv). The rows are tiled by kBlockM (m_block), the keys by kBlockN
 * (n_block). Causal trimming gives m_block the K/V blocks [0, n_block_max) (FA3's formula,
 * fx_splitkv_n_block_max). Split s of num_splits takes the contiguous blocks
 *     [s·per, min((s + 1)·per, n_block_max)),   per = ceil(n_block_max / num_splits),
 * so the late splits may be empty, even with num_splits <= n_block_max (10 blocks in 6 splits:
 * per = 2, split 5 empty). For each (m_block, split) whose range holds a block, every row i of
 * the tile runs the online softmax over the range's keys it sees, from the last block down to
 * the first as the stages do, and writes
 *     O_s  = Σ_j P_j·V_j / ℓ_s,  P_j = exp(S_j − m_s),  ℓ_s = Σ_j P_j,  S_j = scale·Q_i·K_j,
 *     LSE_s = m_s + log ℓ_s                      (natural log; m_s = max_j S_j over the split),
 * O_s rounded to fp32 (unnormalised during the loop, normalised once at the end, as FA's
 * split kernels), LSE_s fp32. A row that sees no key of a non-empty split writes O_s = 0 and
 * LSE_s = −inf, as the kernel's epilogue does for every row of a tile. An empty split writes
 * LSE_s = −inf for its rows and leaves O_s as it was (FA3 writes nothing there: its O_partial
 * is uninitialised memory). Each split is computed in fp64 and only its outputs are rounded to
 * fp32, so that the model's error is the combine's alone and the unit tests can bound it (the
 * kernel's own forward error is judged by the pass rule, as in every stage).
 *
 * The combine. Per row, over the num_splits partials (Flash-Decoding's reduction; FA3's
 * combine kernel, in fp32 as it is here):
 *     m    = max_s LSE_s                  (a row whose LSE_s are all −inf: O = 0, LSE = −inf)
 *     w_s  = exp(LSE_s − m)               (0 for an empty split; 1 for the largest)
 *     LSE  = m + log Σ_s w_s
 *     O    = Σ_{s : w_s > 0} (w_s / Σ w)·O_s
 * which is exact attention: O_s·ℓ_s·e^{m_s} are the split's unnormalised sums, e^{LSE_s} its
 * ℓ_s·e^{m_s}, and the w_s / Σ w are e^{LSE_s − LSE}, each split's share of the row's ℓ. A split
 * with w_s = 0 (empty, or a weight below fp32's range) is never read, so an unwritten O_s
 * cannot reach O even when it holds NaN.
 *
 * The heuristic (fx_num_splits_heuristic, below): FA3's num_splits_heuristic restated.
 *
 * Layouts: q, k, v, O and LSE those of fx_problem.h (fixed length; a variable-length batch is
 * refused). The partials FA3's (heads before rows):
 *     O_partial   fp32 [num_splits, batch, heads_q, seqlen_q, head_dim_v]
 *     LSE_partial fp32 [num_splits, batch, heads_q, seqlen_q]
 */
#ifndef FX_SPLITKV_H
#define FX_SPLITKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most splits, chosen or forced: FA3's heuristic caps at 128 (its combine kernel is
 * instantiated up to kMaxSplits 256 for a user's count; here one cap serves both). */
#define FX_SPLITKV_MAX_SPLITS 128

/* FA3's stand-in for the L2 size in the heuristic: 50 MiB (heuristics.h's size_l2). */
#define FX_SPLITKV_L2_BYTES (50 * 1024 * 1024)

/* The tiles: kBlockM query rows per m_block, kBlockN keys per n_block. */
typedef struct fx_splitkv_tiles {
    int block_m; /* kBlockM */
    int block_n; /* kBlockN */
} fx_splitkv_tiles;

/* The split's partial results, owned by the caller (fx_splitkv_partials_alloc). */
typedef struct fx_splitkv_partials {
    int num_splits, batch, heads_q, seqlen_q, head_dim_v;
    float *o;   /* [num_splits, batch, heads_q, seqlen_q, head_dim_v] */
    float *lse; /* [num_splits, batch, heads_q, seqlen_q]             */
} fx_splitkv_partials;

/* Element offsets of split s's row i of (batch b, query head h) in the partials. */
static inline size_t fx_splitkv_lse_at(const fx_splitkv_partials *t, int s, int b, int h, int i)
{
    return (((size_t)s * t->batch + b) * t->heads_q + h) * t->seqlen_q + i;
}
static inline size_t fx_splitkv_o_at(const fx_splitkv_partials *t, int s, int b, int h, int i)
{
    return fx_splitkv_lse_at(t, s, b, h, i) * t->head_dim_v;
}

/* Partials for problem p and num_splits splits (1 .. FX_SPLITKV_MAX_SPLITS), every element of
 * o and lse set to `fill` (NaN in the tests: an element never written stays NaN). Aborts with a
 * message when memory runs out. fx_splitkv_partials_free releases them. */
fx_splitkv_partials fx_splitkv_partials_alloc(const fx_problem *p, int num_splits, float fill);
void fx_splitkv_partials_free(fx_splitkv_partials *t);

/* K/V blocks [0, n_block_max) that m_block's rows may see (FA3's block.h, without a local
 * window): ceil(seqlen_k / kBlockN), and when causal at most
 * ceil(((m_block + 1)·kBlockM + seqlen_k − seqlen_q) / kBlockN), 0 when that is <= 0 (the
 * tile's rows see no key). FA3 does not clip the tile's last row at seqlen_q: the bound is the
 * kernel's, not the tightest one. */
int fx_splitkv_n_block_max(int seqlen_q, int seqlen_k, bool causal, fx_splitkv_tiles tiles,
                           int m_block);

/* Split `split` of `num_splits` (>= 1) over blocks [0, n_block_max): [*n_begin, *n_end), and
 * whether it holds a block (false: empty, *n_begin >= *n_end). */
bool fx_splitkv_split_range(int n_block_max, int num_splits, int split, int *n_begin, int *n_end);

/* The split forward (above) of fixed-length problem p (softmax_scale resolved; seqlen_k may be
 * 0 in a problem built by hand, when every split is empty) into `part` (from
 * fx_splitkv_partials_alloc(p, num_splits, ...)). Writes LSE_partial everywhere and O_partial
 * only for the rows of non-empty (m_block, split) tiles. Rows run in parallel (OpenMP); the
 * results do not depend on the thread count. Aborts with a message on a varlen problem, tiles
 * below 1, or partials of another shape. */
void fx_splitkv_forward(const fx_problem *p, const float *q, const float *k, const float *v,
                        fx_splitkv_tiles tiles, fx_splitkv_partials *part);

/* The combine (above) of one row: LSE_s = lse_partial[s·lse_stride], O_s the head_dim_v floats
 * at o_partial + s·o_stride, s < num_splits. Writes o[0 .. head_dim_v) and *lse. Reads O_s only
 * for the splits with w_s > 0. In fp32, as the combine kernel. */
void fx_splitkv_combine_row(int num_splits, int head_dim_v, const float *lse_partial,
                            size_t lse_stride, const float *o_partial, size_t o_stride, float *o,
                            float *lse);

/* The combine of every row of `part` into O [batch, seqlen_q, heads_q, head_dim_v] and LSE
 * [batch, heads_q, seqlen_q] of p (fx_problem.h's layouts). */
void fx_splitkv_combine(const fx_problem *p, const fx_splitkv_partials *part, float *o, float *lse);

/*
 * FA3's num_splits heuristic (heuristics.h, num_splits_heuristic; its inputs from
 * flash_api.cpp), restated:
 *   1. The tiles already (almost) fill the GPU — total_m_blocks >= 0.8·num_sms — : 1 split,
 *      unless one KV head is too big for the L2 (kv_head_bytes > FX_SPLITKV_L2_BYTES), the
 *      queries pass over the K/V at least twice (num_m_blocks >= 2·num_sms) and the problem is
 *      not causal: then ceil(kv_head_bytes / FX_SPLITKV_L2_BYTES) splits, so that each split's
 *      K/V fits in the L2 (at most max_splits and n_blocks: the second never binds there,
 *      since kBlockN·(head_dim + head_dim_v)·bytes is far below 50 MiB).
 *   2. Few K/V blocks (num_n_blocks <= 4): 1 split; splitting would cost more than it brings.
 *   3. Else the wave efficiency of S splits, e(S) = w / ceil(w) with w = total_m_blocks·S /
 *      num_sms (the fraction of the last wave of CTAs that has work), for S = 1 .. min(max_splits,
 *      num_sms, num_n_blocks); the smallest S with e(S) >= 0.85·max e: the fewest splits (each
 *      costs a partial O written and read back) that fill the SMs nearly as well as the best.
 * The comparisons in fp32 (0.8f·num_sms, the waves) and 0.85 in fp64, as FA3 writes them. The
 * result is in [1, min(max_splits, max(num_n_blocks, 1))].
 */
typedef struct fx_splitkv_heuristic_in {
    int num_sms;           /* the GPU's SM count, >= 1 (132 on an H100 SXM or H200)     */
    int total_m_blocks;    /* CTAs of one split: batch·heads·num_m_blocks                */
    int num_m_blocks;      /* m_blocks of one (batch, head)                              */
    int num_n_blocks;      /* K/V blocks of a (batch, head): ceil(seqlen_k / kBlockN)    */
    int64_t kv_head_bytes; /* one KV head: seqlen_k·(head_dim + head_dim_v)·dtype bytes  */
    bool causal;           /* FA3: causal or local                                        */
    int max_splits;        /* FX_SPLITKV_MAX_SPLITS                                       */
} fx_splitkv_heuristic_in;

int fx_num_splits_heuristic(const fx_splitkv_heuristic_in *in);

/* The heuristic's inputs for problem p (fixed length), as flash_api.cpp derives them: with
 * pack_gqa (FA3 forces PackGQA whenever it splits; stage 13) the rows of a KV head's
 * heads_q/heads_kv query heads share m_blocks, num_m_blocks = ceil(seqlen_q·G / kBlockM) and
 * total_m_blocks = batch·heads_kv·num_m_blocks; without (stage 12), ceil(seqlen_q / kBlockM)
 * and batch·heads_q·num_m_blocks. max_splits FX_SPLITKV_MAX_SPLITS. */
fx_splitkv_heuristic_in fx_splitkv_heuristic_inputs(const fx_problem *p, fx_splitkv_tiles tiles,
                                                    int num_sms, bool pack_gqa);

/* A forced count (--num-splits N): 0 when 1 <= N <= FX_SPLITKV_MAX_SPLITS, else 2 with a
 * message naming N and the limit in `why`. Every valid N gives the unsplit result: N above the
 * number of K/V blocks only adds empty splits (the unit tests run N up to n_blocks + 2). */
int fx_splitkv_check_num_splits(int num_splits, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
