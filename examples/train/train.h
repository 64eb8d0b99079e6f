/*
 * train.h — precc-train's map: a two-layer MLP trained through precc_rt
 * on a teacher-student regression task, one Run per recipe plus an fp32
 * reference computed here on the host.
 *
 *   mlp.c    the task, the model's forward/backward/step on precc_rt (or
 *            fp32 host GEMMs for the reference), checkpoints
 *   svg.c    loss.svg: the curves and their error against fp32
 *   main.c   flags, artifacts (precc build), progress, --json
 */
#ifndef PRECC_TRAIN_H
#define PRECC_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "precc/precc_rt.h"

/* The task: x ~ N(0, 1) [M, DIN]; target = teacher(x) + NOISE * N(0, 1),
 * teacher = AMP * relu(x A^T) B^T with fixed random A, B; the student has
 * the teacher's shape, so the expected loss floor is NOISE^2. The loss is
 * the mean over a global batch of GLOBAL micro-batches like this one (as
 * data-parallel training averages over many ranks), so one micro-batch's
 * gradients are ~1e-8: fp16 without a loss scale flushes most of them to
 * zero (its smallest subnormal is 6e-8). ADAM_EPS is below that scale so
 * it does not damp the fp32 run itself. */
#define DIN 128
#define HID 256
#define DOUT 128
#define BATCH 128
#define AMP 0.05f
#define NOISE 0.005f
#define GLOBAL 256
#define ADAM_EPS 1e-12
#define LOSS_FLOOR ((double)NOISE * NOISE)

typedef struct Config {
	uint64_t seed;
	double lr, max_norm;
	long inject_nan;          /* step whose gradient gets a NaN (testing), or -1 */
} Config;

typedef struct Linear {
	int l;                    /* precc layer index */
	long k, n;
	precc_layer_sizes sz;
	void *state, *saved, *work;   /* the layer API's regions (backend memory) */
	void *w;                  /* working weights on the backend (sz.w_format) */
	float *master, *m, *v;    /* host, fp32 storage of any format's codes */
	void *working;            /* host copy of the working weights */
	precc_param opt;
	float *grad;              /* host fp32 gradient [n, k] */
	void *dw;                 /* backend dW (cuda: main_grad is host-only) */
} Linear;

typedef struct Run {
	char name[128];           /* recipe name, or "fp32" */
	char dir[4096];           /* artifact directory */
	int ref;                  /* the fp32 host reference */
	precc_rt *rt;
	precc_training_policy pol;
	precc_loss_scaler scaler;
	Linear L[2];
	/* backend activations */
	void *x1, *y1, *x2, *y2, *dy2, *dx2, *dy1;
	/* delayed scaling's commit of both layers in one launch */
	void *commit_table;
	precc_rt_bulk_commit *commit;
	float *loss;              /* per step, cap entries */
	long cap, steps;          /* steps done */
	long nonfinite;           /* steps whose gradients had inf/NaN */
	long adam_t;              /* AdamW steps taken */
	double dy_nonzero, dy_flushed;  /* loss gradients, and those the dY format
	                                   rounds to zero (underflow) */
	uint64_t recipe_hash, model_hash;
} Run;

/* mlp.c */
int run_open(Run *r, const char *name, const char *dir, precc_backend be,
             const Config *c, char *err, size_t errsz);
void run_close(Run *r);
/* One training step (r->steps + 1); the loss goes to r->loss. */
int run_step(Run *r, const Config *c, char *err, size_t errsz);
int ckpt_save(Run *runs, int n, const Config *c, const char *path, char *err,
              size_t errsz);
int ckpt_load(Run *runs, int n, const Config *c, const char *path, char *err,
              size_t errsz);
/* The model file precc builds (the two linears), written to path. */
int write_model(const char *path);

/* svg.c */
int write_svg(const char *path, Run *runs, int n);

#endif
