/*
 * dedupe.c — identical kernels share one. Layers of the same shape and
 * recipe make the same kernels (x.quantize of every q_proj of a model);
 * each kernel gets a content hash, hash=H (FNV-1a 64, ir_func_hash: the
 * canonical text of its body with values numbered in order, M symbolic,
 * no names, comments or param kinds, plus the target and the compiler
 * version — never a path), and of kernels with equal hashes and equal
 * canonical text the first is kept and the others' calls point to it.
 * Kept kernels are named by what they do and their hash,
 * @x.quantize.1a2b3c4d (@amax.… when x and dy share it), with calls=N
 * (call sites sharing it); the module ends with a one-line count.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "precc/version.h"

typedef struct Kern {
	Func *f;
	uint64_t h;
	char *text;             /* canonical text (collision check) */
	int rep;                /* index of the kernel it is merged into */
	int calls;
	char group[128];        /* what it does: the callee name less the caller's */
} Kern;

/* The hash, then the canonical text: the key two kernels must share. */
static char *
canon_text(const Func *f, uint64_t h)
{
	char *s = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&s, &n);

	if (!fp)
		abort();
	fprintf(fp, "%016" PRIx64 "\n", h);
	ir_print_func_canon(fp, f);
	fclose(fp);
	return s;
}


void
dedupe(Module *m, const Target *t)
{
	int n = 0, ncall = 0, ndistinct = 0;
	Kern *k = calloc((size_t)m->nfn + 1, sizeof *k);
	NameTab byname, bytext, taken;   /* kernel name, canonical text, new name */

	if (!k)
		abort();
	drop_variants(m);         /* a rerun: the copies go before they rename anything */
	ir_names_init(&byname, (size_t)m->nfn);
	ir_names_init(&bytext, (size_t)m->nfn);
	ir_names_init(&taken, (size_t)m->nfn);
	for (int j = 0; j < m->nfn; j++)
		if (m->fn[j]->kernel) {
			Func *f = m->fn[j];
			/* the body's hash: a tile is schedule's choice, made after
			 * this (passes run again on scheduled IR: the same names) */
			Func body = *f;
			body.pattr[PA_TILE] = NULL;
			k[n] = (Kern){.f = f, .rep = n};
			k[n].h = ir_func_hash(&body, f->pattr[PA_TARGET] ? f->pattr[PA_TARGET] : t->name);
			k[n].text = canon_text(&body, k[n].h);
			snprintf(k[n].group, sizeof k[n].group, "%s", f->name);
			if (f->pattr[PA_HASH]) {      /* deduped before: drop ".HASH" */
				char *dot = strrchr(k[n].group, '.');
				if (dot && strspn(dot + 1, "0123456789abcdef") == strlen(dot + 1))
					*dot = 0;
			}
			ir_names_put(&byname, f->name, n);
			n++;
		}
	/* what each kernel does: its name less its first caller's */
	for (int j = 0; j < m->nfn; j++)
		for (int x = 0; x < m->fn[j]->nins; x++) {
			const Ins *i = &m->fn[j]->ins[x];
			int c;
			size_t l = strlen(m->fn[j]->name);
			if (i->op != OP_call || (c = ir_names_get(&byname, i->callee)) < 0)
				continue;
			if (!k[c].calls && !strncmp(i->callee, m->fn[j]->name, l) && i->callee[l] == '.')
				snprintf(k[c].group, sizeof k[c].group, "%s", i->callee + l + 1);
			k[c].calls++;
			ncall++;
		}
	/* equal hash and canonical text: the first is kept */
	for (int j = 0; j < n; j++) {
		int r = ir_names_put(&bytext, k[j].text, j);
		if (r < 0)
			continue;
		k[j].rep = r;
		k[r].calls += k[j].calls;
		if (strcmp(k[r].group, k[j].group)) {
			/* shared across tensors (x and dy): named by what it does */
			const char *d = strchr(k[r].group, '.');
			if (d)
				memmove(k[r].group, d + 1, strlen(d));
		}
	}
	/* names of the kept kernels */
	char **newname = calloc((size_t)n + 1, sizeof(char *));
	if (!newname)
		abort();
	for (int j = 0; j < n; j++) {
		char buf[256];
		if (k[j].rep != j)
			continue;
		ndistinct++;
		for (int digits = 8; digits <= 16; digits++) {
			snprintf(buf, sizeof buf, "%s.%0*" PRIx64, k[j].group, digits,
			         k[j].h >> (64 - 4 * digits));
			if (ir_names_get(&taken, buf) < 0)
				break;
		}
		newname[j] = strdup(buf);
		if (!newname[j])
			abort();
		ir_names_put(&taken, newname[j], j);
	}
	for (int j = 0; j < m->nfn; j++)
		for (int x = 0; x < m->fn[j]->nins; x++) {
			Ins *i = &m->fn[j]->ins[x];
			int c;
			if (i->op != OP_call || (c = ir_names_get(&byname, i->callee)) < 0)
				continue;
			free(i->callee);
			i->callee = strdup(newname[k[c].rep]);
			if (!i->callee)
				abort();
		}
	for (int j = 0; j < n; j++)
		if (k[j].rep == j) {
			Func *f = k[j].f;
			free(f->name);
			f->name = strdup(newname[j]);
			if (!f->name)
				abort();
			ir_set_attr(f->pattr, PA_HASH, "%016" PRIx64, k[j].h);
			ir_set_attr(f->pattr, PA_CALLS, "%d", k[j].calls);
		}
	/* k[] lists the kernels in module order: drop the merged ones */
	bool *drop = calloc((size_t)m->nfn + 1, 1);
	if (!drop)
		abort();
	for (int j = 0, c = 0; j < m->nfn; j++)
		if (m->fn[j]->kernel && c < n && k[c].f == m->fn[j]) {
			drop[j] = k[c].rep != c;
			c++;
		}
	ir_func_compact(m, drop);
	free(drop);
	ir_names_free(&byname);
	ir_names_free(&bytext);
	ir_names_free(&taken);
	ir_comment(&m->endcomment, "dedupe: %d kernel call%s, %d distinct kernel%s (%s, precc %s)",
	           ncall, ncall == 1 ? "" : "s", ndistinct, ndistinct == 1 ? "" : "s", t->name,
	           PRECC_VERSION);
	for (int j = 0; j < n; j++) {
		free(k[j].text);
		free(newname[j]);
	}
	free(newname);
	free(k);
}
