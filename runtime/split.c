/*
 * split.c — floor 2 (plan.h): a layer's plan cut into forward, backward
 * and commit (precc_rt.h, "a layer as forward, backward and commit"),
 * once per layer when the manifest loads: each step's phase from its
 * `gemm` (fprop: forward; dgrad, wgrad: backward) unless every output is
 * a next_state buffer (the delayed-scaling update: commit); each buffer's
 * place from its role and from which phases write and read it. layer.c
 * then only walks these tables: nothing after the load allocates.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

enum { PH_FWD = RT_PH_FWD, PH_BWD = RT_PH_BWD, PH_COMMIT = RT_PH_COMMIT, NPHASE };
enum { IO_X, IO_W, IO_BIAS, IO_Y, IO_DY, IO_DX, IO_DW, NIO };
_Static_assert(NIO == sizeof ((rt_split *)0)->io / sizeof(int), "plan.h's rt_split.io");

#define REGION_ALIGN RT_REGION_ALIGN

static size_t align_up(size_t n) { return (n + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1); }

static int m_free(const rt_type *t)
{
	for (int d = 0; d < t->rank; d++)
		if (t->dim[d] < 0)
			return 0;
	return 1;
}

void rt_split_free(rt_split *s)
{
	if (!s)
		return;
	free(s->why);
	free(s->phase);
	free(s->place);
	free(s->minv);
	free(s->state_off);
	free(s->amax);
	free(s->out_amax);
	free(s->ptr);
	free(s->at_off);
	free(s);
}

static int refuse(rt_split *s, const rt_layer *l, const char *fmt, const char *a,
                  const char *b)
{
	char msg[1024], what[768];

	snprintf(what, sizeof what, fmt, a, b);
	snprintf(msg, sizeof msg, "layer '%s' cannot be run as forward/backward/"
	         "commit: %s", l->fqn, what);
	if (!(s->why = strdup(msg)))
		return -1;
	return 0;
}

/* Is step st the delayed-scaling update: every output a next_state? */
static int is_commit(const rt_artifact *a, const rt_layer *l, int st)
{
	const rt_kdesc *k = &a->kern[l->step[st].kernel];
	int outs = 0, next = 0;

	for (int p = 0; p < k->nparam; p++)
		if (k->param[p].out) {
			outs++;
			next += strcmp(l->buf[l->step[st].arg[p]].role, "next_state") == 0;
		}
	return outs && next == outs;
}

/* Whether a GEMM kernel's step writes buffer b. */
static int gemm_writes(const rt_artifact *a, const rt_layer *l, int b)
{
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &a->kern[l->step[st].kernel];
		for (int p = 0; p < k->nparam; p++)
			if (k->param[p].out && l->step[st].arg[p] == b && k->shape
			    && !strcmp(k->shape, "gemm"))
				return 1;
	}
	return 0;
}

static int split_layer(const rt_artifact *a, const rt_layer *l, rt_split *s)
{
	static const char *const in_role[NIO] = {
		[IO_X] = "input", [IO_W] = "weight", [IO_BIAS] = "bias",
		[IO_DY] = "grad_output"};
	int nb = l->nbuf;
	unsigned char *wr = calloc((size_t)nb + 1, 1), *rd = calloc((size_t)nb + 1, 1);
	unsigned char *grad = calloc((size_t)nb + 1, 1);
	int rc = -1;

	if (!wr || !rd || !grad)
		goto out;
	for (int i = 0; i < NIO; i++)
		s->io[i] = -1;
	s->main_grad = -1;
	s->offsets = -1;
	/* Phases by dataflow, not by the steps' gemm labels (a quantize shared
	 * by fprop and dgrad carries whichever GEMM follows it): a step that
	 * reads dY or anything computed from it is backward, the rest forward,
	 * the update steps commit. Steps come in dependency order. */
	for (int b = 0; b < nb; b++)
		grad[b] = strcmp(l->buf[b].role, "grad_output") == 0;
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &a->kern[l->step[st].kernel];
		int ph = PH_FWD;
		if (is_commit(a, l, st))
			ph = PH_COMMIT;
		else
			for (int p = 0; p < k->nparam; p++)
				if (!k->param[p].out && grad[l->step[st].arg[p]])
					ph = PH_BWD;
		s->phase[st] = (unsigned char)ph;
		for (int p = 0; p < k->nparam; p++) {
			int b = l->step[st].arg[p];
			(k->param[p].out ? wr : rd)[b] |= (unsigned char)(1u << ph);
			if (k->param[p].out && ph == PH_BWD)
				grad[b] = 1;
		}
	}
	/* a phase may read only what its own or an earlier phase wrote */
	for (int b = 0; b < nb; b++)
		for (int ph = 0; ph < NPHASE; ph++)
			if ((rd[b] >> ph & 1) && (wr[b] >> ph) > 1 && !(wr[b] & ((2u << ph) - 1))) {
				rc = refuse(s, l, "buffer '%s' is read in the %s phase before a "
				            "later phase writes it", l->buf[b].name,
				            ph == PH_FWD ? "forward" : "backward");
				goto out;
			}
	for (int b = 0; b < nb; b++) {
		const rt_buffer *bf = &l->buf[b];
		int io = -1;
		s->minv[b] = (unsigned char)m_free(&bf->type);
		for (int i = 0; i < NIO; i++)
			if (in_role[i] && strcmp(bf->role, in_role[i]) == 0)
				io = i;
		if (io < 0 && strcmp(bf->role, "output") == 0 && strchr(bf->type_str, '{')
		    && gemm_writes(a, l, b)) {
			/* a GEMM kernel's scale-shaped output is its output amax
			 * (y.amax, dx.amax; GEMM results are 16- or 32-bit, never
			 * codes with a scale): the caller reads it from the saved
			 * region (precc_rt_buffer_place) while it holds the region */
			s->place[b] = PRECC_PLACE_SAVED;
			s->out_amax[b] = 1;
			continue;
		}
		if (io < 0 && strcmp(bf->role, "output") == 0) {
			/* y is the forward's output; of the backward's, dx (dgrad) and
			 * dw (wgrad) by their GEMM's label, else by shape: dW [n, k]
			 * does not depend on M */
			const char *g = NULL;
			for (int st = 0; st < l->nstep && !g; st++) {
				const rt_kdesc *k = &a->kern[l->step[st].kernel];
				for (int p = 0; p < k->nparam; p++)
					if (k->param[p].out && l->step[st].arg[p] == b)
						g = l->step[st].gemm ? l->step[st].gemm : "";
			}
			if (wr[b] == 1u << PH_FWD)
				io = IO_Y;
			else if (wr[b] == 1u << PH_BWD)
				io = g && !strcmp(g, "dgrad") ? IO_DX : g && !strcmp(g, "wgrad")
				   ? IO_DW : s->minv[b] ? IO_DW : IO_DX;
		}
		if (io >= 0) {
			if (s->io[io] >= 0) {
				static const char *const ion[NIO] = {"x", "w", "bias", "y",
				                                     "dy", "dx", "dw"};
				char two[512];
				snprintf(two, sizeof two, "'%s' and '%s'", l->buf[s->io[io]].name,
				         bf->name);
				rc = refuse(s, l, "buffers %s would both be its %s", two, ion[io]);
				goto out;
			}
			s->io[io] = b;
			s->place[b] = (unsigned char)(PRECC_PLACE_X + io);
			continue;
		}
		if (strcmp(bf->role, "main_grad") == 0) {
			if (s->main_grad >= 0) {
				rc = refuse(s, l, "two main_grad buffers ('%s' and '%s')",
				            l->buf[s->main_grad].name, bf->name);
				goto out;
			}
			s->main_grad = b;
			s->place[b] = PRECC_PLACE_MAIN_GRAD;
			continue;
		}
		if (strcmp(bf->role, "offsets") == 0) {
			/* an expert group's: the caller's, bound by the grouped calls */
			s->place[b] = PRECC_PLACE_OFFSETS;
			s->offsets = b;
			continue;
		}
		if (strcmp(bf->role, "state") == 0 || strcmp(bf->role, "next_state") == 0) {
			size_t bytes = rt_type_bytes(&bf->type, 1, NULL, NULL);
			if (!s->minv[b]) {
				rc = refuse(s, l, "state buffer '%s' %s depends on M", bf->name,
				            bf->type_str);
				goto out;
			}
			s->place[b] = PRECC_PLACE_STATE;
			s->state_off[b] = s->state_bytes;
			s->state_bytes += align_up(bytes);
			s->has_state = 1;
			continue;
		}
		if (!wr[b]) {
			rc = refuse(s, l, "buffer '%s' (role %s) is read but no step writes "
			            "it", bf->name, bf->role);
			goto out;
		}
		/* scratch: saved when a phase other than its writer's reads it */
		s->place[b] = (rd[b] & ~wr[b]) ? PRECC_PLACE_SAVED : PRECC_PLACE_WORKSPACE;
		s->amax[b] = s->place[b] == PRECC_PLACE_SAVED && (rd[b] >> PH_COMMIT & 1) &&
		             bf->type.fmt == PRECC_FP32 && s->minv[b];
	}
	if (s->io[IO_X] >= 0)
		s->reads_x = rd[s->io[IO_X]] >> PH_BWD & 1;
	if (s->io[IO_W] >= 0)
		s->reads_w = rd[s->io[IO_W]] >> PH_BWD & 1;
	if (s->io[IO_X] < 0 || s->io[IO_W] < 0 || s->io[IO_Y] < 0) {
		rc = refuse(s, l, "it has no %s%s", s->io[IO_X] < 0 ? "input x"
		            : s->io[IO_W] < 0 ? "weight w" : "output y", "");
		goto out;
	}
	rc = 0;
out:
	free(wr);
	free(rd);
	free(grad);
	return rc;
}

int rt_layers_split(rt_artifact *a)
{
	for (int i = 0; i < a->nlayer + a->ngroup; i++) {
		rt_layer *l = &a->layer[i];
		rt_split *s = calloc(1, sizeof *s);
		size_t nb = (size_t)l->nbuf + 1;
		if (!s || !(s->phase = calloc((size_t)l->nstep + 1, 1)) ||
		    !(s->place = calloc(nb, 1)) || !(s->minv = calloc(nb, 1)) ||
		    !(s->state_off = calloc(nb, sizeof *s->state_off)) ||
		    !(s->amax = calloc(nb, 1)) || !(s->out_amax = calloc(nb, 1)) ||
		    !(s->ptr = calloc(nb, sizeof *s->ptr)) ||
		    !(s->at_off = calloc(nb, sizeof *s->at_off)) || split_layer(a, l, s)) {
			rt_split_free(s);
			rt_error("plan: out of memory");
			return -1;
		}
		l->split = s;
	}
	return 0;
}

