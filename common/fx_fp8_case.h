/*
 * fx_fp8_case.h — one e4m3 case (stage 10), end to end.
 *
 * The inputs are drawn in fp32 (fx_draw.h: the same numbers the 16-bit stages round), then
 * prepared by the problem's recipe (fx_problem.h: fp8_scaling, fp8_hadamard; fx_fp8_prepare):
 * e4m3 codes and fp32 descales; or, with --load DIR, the codes, descales and (where DIR has
 * them) fp32 inputs are DIR's (fx_load_fp8_case), and --save DIR writes them (fx_save.h), so
 * that a case saved and loaded runs on the same bits. The stage runs on the codes and
 * descales (V transposed on the host when p->fp8_v_transposed). Its bf16 O and fp32 LSE are
 * then compared, on sampled (batch, head) slices, all rows of each, with
 *   - the fp64 reference on the dequantized inputs (descale·e4m3(code)): the pass rule below;
 *   - the fp64 reference on the fp32 inputs before quantization: the error a user sees (the
 *     FA3 paper's Table 3 measures this one), reported, not judged (n/a for a loaded folder
 *     without them);
 *   - the CPU model of the algorithm (fx_fp8_model.h) on the same codes and descales, which
 *     is the emulation of the pass rule and is reported against both references and the
 *     stage;
 * and, on the same slices, with the previous stage (08) in bf16 on the dequantized inputs
 * rounded to bf16.
 *
 * The pass rule for e4m3 is FlashAttention's (fx_check.h) with the CPU model as the
 * emulation: max|stage − ref_dq| <= 2·max|model − ref_dq| + one bf16 ulp at the largest
 * |ref_dq|, and the same for the LSE with fx_pass_lse. Why against the dequantized inputs:
 * the quantization is the same step for the stage and the model (they read the same codes),
 * so the error it adds is not the kernel's; what is left is P rounded to e4m3, the fp32 (or
 * tensor-core) sums and the bf16 output, which the model emulates. FA3's own tests compare
 * against a reference in the low precision in the same spirit. The model sums both GEMMs as
 * Hopper's e4m3 wgmma does (fx_fp8_acc_hopper, measured by tests/gpu/fp8_acc_probe.cu), so
 * the tensor cores' own truncation is in the emulation's error too; the rule then leaves the
 * stage as much again, and the closer stage-against-model differences are printed, not
 * judged (docs/10_fp8.md, "The pass rule for e4m3"). The stage against stage 08 is held to
 * twice that bound plus how far the fp64 truth moves between the two stages' inputs (the
 * dequantized values and their bf16 roundings), measured on the same rows.
 */
#ifndef FX_FP8_CASE_H
#define FX_FP8_CASE_H

#include <stdbool.h>

#include "fx_case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the e4m3 problem p (which c->self's capabilities cover) through c->self on the GPU
 * (device open): the checks above when c->opt.check, --digest, --save, --repeat, --bench and
 * --csv as asked, on c->loaded with --load. Prints the report when `verbose`. Returns as
 * fx_run_case: 0 pass, 1 fail (a check, a CUDA error, a lost CSV row, a file --save could not
 * write), 2 too large for device memory or an option e4m3 does not take (--bwd). */
int fx_run_fp8_case(const fx_ctx *c, const fx_problem *p, bool verbose, fx_case_result *res);

/* --cpu at e4m3: the same inputs (drawn and quantized as above) through the CPU model alone,
 * summing as Hopper's e4m3 wgmma does (fx_fp8_acc_hopper), on the same slices; no device is
 * opened. The model is the stage here, as a 16-bit stage's --cpu checks its model
 * (fx_check_forward): max|model − ref_dq| <= 2·max|emu − ref_dq| + one bf16 ulp at the largest
 * |ref_dq|, and the LSE by fx_pass_lse, where emu is standard attention in e4m3 on the
 * dequantized inputs (fp32 S and softmax, the normalized P rounded to e4m3 at 2^8·P, O in
 * fp32 then bf16: the 16-bit baseline of fx_emu_forward_rows with e4m3's P). The model
 * against fp64 on the fp32 inputs is reported, not judged. What it does not check: the
 * kernel (none runs), nor the model against the hardware (tests/gpu/fp8_acc_probe.cu and
 * every GPU case do). --load and --save as for the GPU case (--save writes the model's O and
 * LSE: the checked slices' rows, NaN elsewhere). Prints the report; returns 0 pass, 1 fail (a
 * check, or a file --save could not write), 2 an option e4m3 does not take (--bwd). */
int fx_run_fp8_cpu_case(const fx_ctx *c, const fx_problem *p);

#ifdef __cplusplus
}
#endif
#endif
