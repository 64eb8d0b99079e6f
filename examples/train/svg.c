/*
 * svg.c — loss.svg: two panels over the steps. Top: each recipe's loss
 * (log scale) over the fp32 reference (black) and the task's loss floor
 * (dashed). Bottom: each recipe's relative error against fp32,
 * (loss - loss_fp32) / loss_fp32, in percent, smoothed over 10 steps so the
 * trend shows through the batch noise. Plain SVG 1.1, no scripts.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

static const char *const colour[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

#define W 900
#define PH 300                  /* each panel's height */
#define L 80                    /* left margin */
#define R 230                   /* right margin: the legend */
#define T 40
#define GAP 70

static double smooth(const float *v, const float *ref, long i, int rel)
{
	double s = 0;
	int n = 0;
	for (long j = i - 9; j <= i; j++)
		if (j >= 0) {
			s += rel ? ((double)v[j] - ref[j]) / ref[j] * 100.0 : v[j];
			n++;
		}
	return s / n;
}

int write_svg(const char *path, Run *runs, int nr)
{
	FILE *f = fopen(path, "w");
	const Run *ref = NULL;
	long steps = 0;
	double lo = LOSS_FLOOR / 2, hi = 0, elo = -5, ehi = 5;

	if (!f)
		return -1;
	for (int i = 0; i < nr; i++) {
		if (runs[i].ref)
			ref = &runs[i];
		if (runs[i].steps > steps)
			steps = runs[i].steps;
		for (long s = 0; s < runs[i].steps; s++)
			if (isfinite(runs[i].loss[s]) && runs[i].loss[s] > hi)
				hi = runs[i].loss[s];
	}
	if (!steps || !(hi > 0)) {
		fclose(f);
		return -1;
	}
	for (int i = 0; ref && i < nr; i++)
		for (long s = 0; s < runs[i].steps && s < ref->steps; s++) {
			double e = smooth(runs[i].loss, ref->loss, s, 1);
			if (isfinite(e) && s >= 10) {
				elo = e < elo ? e : elo;
				ehi = e > ehi ? e : ehi;
			}
		}
	if (ehi > 200)
		ehi = 200;
	double lx = log10(lo), hx = log10(hi * 1.2);
	int pw = W - L - R, y2 = T + PH + GAP;
#define X(s) (L + (double)(s) / (double)(steps > 1 ? steps - 1 : 1) * pw)
#define Y1(v) (T + PH - (log10(v) - lx) / (hx - lx) * PH)
#define Y2(e) (y2 + PH - ((e) - elo) / (ehi - elo) * PH)
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	           "font-family=\"sans-serif\" font-size=\"12\">\n", W, y2 + PH + 50);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">precc-train: MLP %dx%dx%d, "
	           "batch %d, loss floor %.2g (dashed)</text>\n", L, DIN, HID, DOUT, BATCH,
	        LOSS_FLOOR);
	/* frames, grid and labels */
	for (int p = 0; p < 2; p++) {
		int top = p ? y2 : T;
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		           "stroke=\"#444\"/>\n", L, top, pw, PH);
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n",
		        L + pw / 2, top + PH + 32);
		for (int k = 0; k <= 4; k++) {
			long s = (steps - 1) * k / 4 + 1;
			fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%ld</text>\n",
			        X(s - 1), top + PH + 16, s);
		}
	}
	fprintf(f, "<text x=\"20\" y=\"%d\" transform=\"rotate(-90 20 %d)\" "
	           "text-anchor=\"middle\">loss (log)</text>\n", T + PH / 2, T + PH / 2);
	for (int e = (int)floor(lx); e <= (int)ceil(hx); e++)
		if (e >= lx && e <= hx)
			fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			           "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
			        L, L + pw, Y1(pow(10, e)), Y1(pow(10, e)), L - 6, Y1(pow(10, e)) + 4, e);
	fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
	           "stroke-dasharray=\"6 4\"/>\n", L, L + pw, Y1(LOSS_FLOOR), Y1(LOSS_FLOOR));
	fprintf(f, "<text x=\"20\" y=\"%d\" transform=\"rotate(-90 20 %d)\" "
	           "text-anchor=\"middle\">loss vs fp32 (%%, 10-step mean)</text>\n",
	        y2 + PH / 2, y2 + PH / 2);
	for (int k = 0; k <= 4; k++) {
		double e = elo + (ehi - elo) * k / 4;
		fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
		           "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%+.1f</text>\n",
		        L, L + pw, Y2(e), Y2(e), L - 6, Y2(e) + 4, e);
	}
	if (elo < 0 && ehi > 0)
		fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
		        L, L + pw, Y2(0.0), Y2(0.0));
	/* curves: fp32 black and last, on top */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0, c = 0; i < nr; i++) {
			const Run *r = &runs[i];
			const char *col = r->ref ? "#000" : colour[c++ % 8];
			if (r->ref != pass)
				continue;
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" "
			           "points=\"", col, r->ref ? "2" : "1.3");
			for (long s = 0; s < r->steps; s++)
				if (isfinite(r->loss[s]) && r->loss[s] > 0)
					fprintf(f, "%.1f,%.1f ", X(s), Y1(fmax(r->loss[s], lo)));
			fprintf(f, "\"/>\n");
			if (ref && !r->ref) {
				fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.3\" "
				           "points=\"", col);
				for (long s = 0; s < r->steps && s < ref->steps; s++) {
					double e = smooth(r->loss, ref->loss, s, 1);
					if (isfinite(e))
						fprintf(f, "%.1f,%.1f ", X(s), Y2(fmin(fmax(e, elo), ehi)));
				}
				fprintf(f, "\"/>\n");
			}
			int ly = T + 10 + 18 * i;
			double fin = r->steps ? smooth(r->loss, r->loss, r->steps - 1, 0) : 0;
			fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" "
			           "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">%s (%.3g)</text>\n",
			        W - R + 12, W - R + 32, ly, ly, col, W - R + 38, ly + 4, r->name, fin);
		}
	fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#555\">(final 10-step mean loss)</text>\n",
	        W - R + 12, T + 18 * nr + 14);
	fprintf(f, "</svg>\n");
	return fclose(f);
}
