/*
 * train.c — the recipe's training policy carried out on the host: loss
 * scaling (torch.amp.GradScaler's rule), the fused unscale + inf/NaN
 * check, gradient clipping by global norm, and AdamW on fp32, bf16 or
 * fp16 masters with the optimizer state in the recipe's format and, for
 * low-precision masters, stochastic rounding from the interpreter's
 * Philox stream. Plain C over host memory: no generated kernels yet.
 *
 * References (transcribed, not copied; the numbers are lines):
 *   GradScaler: torch 2.13.0 torch/amp/grad_scaler.py:363-373 (the step is
 *     skipped when any found_inf is nonzero), :484-560 (update calls
 *     _amp_update_scale_); aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp
 *     (pytorch/pytorch 174170e8) :73-79 (unscale: !isfinite sets found_inf;
 *     g * inv_scale in fp32, g itself when inv_scale == 1), :170-187 (the
 *     update: backoff on found_inf with tracker 0; else tracker + 1, at the
 *     interval scale * growth in double, kept only when finite).
 *   AdamW: torch 2.13.0 torch/optim/adam.py _single_tensor_adam (the CPU
 *     default: foreach and fused are CUDA-only defaults) :414-419 (step + 1,
 *     decoupled decay param *= 1 - lr*wd), :456 (exp_avg.lerp_(grad, 1 -
 *     beta1)), :475 (exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 -
 *     beta2)), :528-548 (bias corrections in double, denom = sqrt(v) /
 *     bc2**0.5 + eps, param.addcdiv_(m, denom, value=-lr/bc1)). Python
 *     scalars are doubles, cast to fp32 where they meet an fp32 tensor;
 *     lerp with weight < 0.5 is self + w * (end - self); addcmul and
 *     addcdiv evaluate self + value * a * b and self + value * a / b left
 *     to right.
 *   Clipping: torch 2.13.0 torch/nn/utils/clip_grad.py:164-181 (clip_coef =
 *     max_norm / (total_norm + 1e-6), clamped to 1, grads multiplied).
 *
 * Floor 4 (rt.h) of the runtime; base.h lists the floors.
 */
#include <math.h>
#include <string.h>

#include "precc/interp.h"
#include "rt.h"

void precc_rt_training_policy(const precc_rt *rt, precc_training_policy *p)
{
	if (rt && rt->art)
		*p = rt->art->training;
	else
		precc_training_policy_default(p);
}

/* ---- loss scaling ------------------------------------------------------------ */

void precc_loss_scaler_init(precc_loss_scaler *s, const precc_training_policy *p)
{
	memset(s, 0, sizeof *s);
	s->kind = p->loss_scale;
	s->scale = p->loss_scale == PRECC_LOSS_NONE ? 1.0f : p->loss_scale_init;
	s->growth_factor = p->growth_factor;
	s->backoff_factor = p->backoff_factor;
	s->growth_interval = p->growth_interval;
}

int precc_loss_scaler_update(precc_loss_scaler *s, int found_inf)
{
	s->steps++;
	s->skipped += found_inf != 0;
	if (s->kind != PRECC_LOSS_DYNAMIC)
		return found_inf != 0;
	if (found_inf) {
		/* float * double, rounded to float (the kernel's assignment) */
		s->scale = (float)((double)s->scale * (double)s->backoff_factor);
		s->growth_tracker = 0;
		return 1;
	}
	if (s->growth_tracker + 1 == s->growth_interval) {
		float grown = (float)((double)s->scale * (double)s->growth_factor);
		if (isfinite(grown))
			s->scale = grown;
		s->growth_tracker = 0;
	} else
		s->growth_tracker++;
	return 0;
}

static float load(int fmt, const void *p, long i)
{
	if (fmt == PRECC_FP32)
		return ((const float *)p)[i];
	return precc_decode((precc_format)fmt, ((const uint16_t *)p)[i]);
}

static int is_host_fmt(int f)
{
	return f == PRECC_FP32 || f == PRECC_BF16 || f == PRECC_FP16;
}

int precc_unscale_check(int ntensors, const void *const *grads,
                        const int *fmt, const long *n, float inv_scale,
                        float *const *out)
{
	int found = 0;

	for (int t = 0; t < ntensors; t++) {
		if (!is_host_fmt(fmt[t])) {
			rt_error("train: gradient tensor %d is %s; the unscale reads fp32, "
			         "bf16 or fp16", t, precc_format_get((precc_format)fmt[t])
			         ? precc_format_get((precc_format)fmt[t])->name : "?");
			return -1;
		}
		for (long i = 0; i < n[t]; i++) {
			float g = load(fmt[t], grads[t], i);
			found |= !isfinite(g);
			out[t][i] = inv_scale == 1.0f ? g : g * inv_scale;
		}
	}
	return found;
}

double precc_clip_grad_norm(int ntensors, float *const *grads, const long *n,
                            double max_norm)
{
	double sum = 0;
	float total, coef;

	for (int t = 0; t < ntensors; t++)
		for (long i = 0; i < n[t]; i++)
			sum += (double)grads[t][i] * (double)grads[t][i];
	total = (float)sqrt(sum);
	if (max_norm <= 0)
		return total;
	coef = (float)max_norm / (total + 1e-6f);
	if (coef < 1.0f)   /* clamp(max=1.0); NaN passes, as in torch */
		for (int t = 0; t < ntensors; t++)
			for (long i = 0; i < n[t]; i++)
				grads[t][i] *= coef;
	else if (coef != coef)
		for (int t = 0; t < ntensors; t++)
			for (long i = 0; i < n[t]; i++)
				grads[t][i] *= coef;
	return total;
}

/* ---- AdamW -------------------------------------------------------------------- */

static void store(int fmt, void *p, long i, float x, precc_round r,
                  uint32_t rbits)
{
	if (fmt == PRECC_FP32)
		((float *)p)[i] = x;
	else
		((uint16_t *)p)[i] = (uint16_t)precc_encode((precc_format)fmt, x, r,
		                                            false, rbits);
}

int precc_adamw_step(const precc_adamw *h, long t, precc_param *p,
                     const float *grad, int stochastic, uint64_t seed)
{
	if (t < 1) {
		rt_error("train: AdamW step %ld; steps count from 1", t);
		return -1;
	}
	if (!is_host_fmt(p->master_format) || !is_host_fmt(p->state_format) ||
	    (p->working && !is_host_fmt(p->working_format))) {
		rt_error("train: AdamW keeps masters, moments and working weights in "
		         "fp32, bf16 or fp16 (formats %d, %d, %d)", p->master_format,
		         p->state_format, p->working_format);
		return -1;
	}
	/* the Python-side scalars: doubles, then fp32 where they meet tensors */
	double bc1 = 1.0 - pow(h->beta1, (double)t);
	double bc2 = 1.0 - pow(h->beta2, (double)t);
	float decay = (float)(1.0 - h->lr * h->weight_decay);
	float w1 = (float)(1.0 - h->beta1);
	float b2 = (float)h->beta2;
	float w2 = (float)(1.0 - h->beta2);
	float bc2_sqrt = (float)pow(bc2, 0.5);
	float eps = (float)h->eps;
	float neg_step = (float)-(h->lr / bc1);
	int sr = stochastic && p->master_format != PRECC_FP32;

	for (long i = 0; i < p->n; i++) {
		float g = grad[i];
		float w = load(p->master_format, p->master, i);
		float m = load(p->state_format, p->m, i);
		float v = load(p->state_format, p->v, i);
		if (h->weight_decay != 0)
			w = w * decay;
		m = fmaf(w1, g - m, m);
		v = v * b2;
		v = fmaf(w2 * g, g, v);
		float denom = sqrtf(v) / bc2_sqrt + eps;
		w = w + neg_step * m / denom;
		store(p->state_format, p->m, i, m, PRECC_RNE, 0);
		store(p->state_format, p->v, i, v, PRECC_RNE, 0);
		store(p->master_format, p->master, i, w, sr ? PRECC_SR : PRECC_RNE,
		      sr ? precc_sr_bits(seed, p->stream, (uint64_t)i) : 0);
		if (p->working)
			store(p->working_format, p->working, i,
			      load(p->master_format, p->master, i), PRECC_RNE, 0);
	}
	return 0;
}
