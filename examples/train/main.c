/*
 * main.c — precc-train: trains a small MLP through precc_rt, once per
 * recipe and once in fp32 on the host, on a synthetic task with a known
 * loss floor, and plots the losses (README, "Training").
 *
 *   precc-train [--recipe R]... [--steps N] [--out DIR] [--json]
 *               [--checkpoint FILE] [--resume FILE] [--backend cpu|cuda|auto]
 *               [--seed S] [--lr LR] [--max-norm X] [--inject-nan STEP]
 *
 * A recipe is a .lua path or a name looked up in the project's recipes/
 * and examples/train/. Each is built with `precc build` for the MLP (the
 * model file is written to DIR/mlp.lua) into DIR/art/NAME.
 */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include "train.h"

#ifndef PRECC_SOURCE_DIR
#define PRECC_SOURCE_DIR "."
#endif
#ifndef PRECC_BIN
#define PRECC_BIN "precc"
#endif

extern char **environ;

static void usage(void)
{
	fprintf(stderr,
	        "usage: precc-train [--recipe R]... [--steps N] [--out DIR] [--json]\n"
	        "                   [--checkpoint FILE] [--resume FILE]\n"
	        "                   [--backend cpu|cuda|auto] [--seed S] [--lr LR]\n"
	        "                   [--max-norm X] [--inject-nan STEP]\n"
	        "Trains a %dx%dx%d MLP (batch %d) on a teacher-student task whose loss\n"
	        "floor is %.3g, once per recipe through precc_rt and once in fp32 on the\n"
	        "host; writes DIR/loss.svg (default DIR: train-out). --steps counts the\n"
	        "steps of this invocation (a resumed run continues its step count).\n",
	        DIN, HID, DOUT, BATCH, LOSS_FLOOR);
	exit(2);
}

static void die(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "precc-train: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	exit(1);
}

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* R as a path, else SRC/recipes/R.lua, else SRC/examples/train/R.lua. */
static void find_recipe(const char *r, char *path, size_t n, char *name, size_t nn)
{
	const char *dirs[] = {PRECC_SOURCE_DIR "/recipes", PRECC_SOURCE_DIR "/examples/train"};
	const char *base = strrchr(r, '/') ? strrchr(r, '/') + 1 : r;
	size_t len = strlen(base);

	if (len > 4 && strcmp(base + len - 4, ".lua") == 0)
		len -= 4;
	snprintf(name, nn, "%.*s", (int)len, base);
	if (strchr(r, '/') || strstr(r, ".lua")) {
		snprintf(path, n, "%s", r);
		if (!is_file(path))
			die("recipe '%s' is not a file%s", r, "");
		return;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(path, n, "%s/%s.lua", dirs[i], r);
		if (is_file(path))
			return;
	}
	die("no recipe '%s' (looked for %s/recipes/NAME.lua and examples/train/NAME.lua)",
	    r, PRECC_SOURCE_DIR);
}

/* precc build RECIPE --model MODEL -o DIR, its output in DIR.log. Read
 * through a pipe, and its tail kept here: on a full disk the log cannot be
 * written either, and a failure must still say why. */
static void build(const char *recipe, const char *model, const char *dir)
{
	const char *precc = getenv("PRECC") ? getenv("PRECC") : PRECC_BIN;
	char logf[4400], tail[4096], buf[4096], logerr[256] = "";
	char *argv[] = {(char *)precc, "build", (char *)recipe, "--model", (char *)model,
	                "-o", (char *)dir, NULL};
	posix_spawn_file_actions_t fa;
	size_t nt = 0;
	ssize_t k;
	pid_t pid;
	int st, rc, fd[2];

	if ((size_t)snprintf(logf, sizeof logf, "%s.log", dir) >= sizeof logf)
		die("output directory name too long: %s%s", dir, "");
	if (pipe(fd))
		die("cannot run '%s': %s", precc, strerror(errno));
	FILE *log = fopen(logf, "w");
	if (!log)
		snprintf(logerr, sizeof logerr, "%s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclose(&fa, fd[0]);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
	posix_spawn_file_actions_addclose(&fa, fd[1]);
	rc = posix_spawnp(&pid, precc, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (rc)
		die("cannot run '%s': %s (set $PRECC to the precc compiler)", precc, strerror(rc));
	while ((k = read(fd[0], buf, sizeof buf)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (log && fwrite(buf, 1, (size_t)k, log) != (size_t)k && !*logerr)
			snprintf(logerr, sizeof logerr, "%s", strerror(errno));
		if ((size_t)k >= sizeof tail) {       /* keep the last sizeof tail bytes */
			memcpy(tail, buf + k - sizeof tail, sizeof tail);
			nt = sizeof tail;
		} else {
			if (nt + (size_t)k > sizeof tail) {
				size_t drop = nt + (size_t)k - sizeof tail;
				memmove(tail, tail + drop, nt - drop);
				nt -= drop;
			}
			memcpy(tail + nt, buf, (size_t)k);
			nt += (size_t)k;
		}
	}
	close(fd[0]);
	if (log && fclose(log) && !*logerr)
		snprintf(logerr, sizeof logerr, "%s", strerror(errno));
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		char how[64];
		if (WIFEXITED(st))
			snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
		else
			snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(st));
		fprintf(stderr, "precc-train: precc build %s failed (%s):\n", recipe, how);
		for (char *p = tail, *e; p < tail + nt; p = e + 1) {
			if (!(e = memchr(p, '\n', (size_t)(tail + nt - p))))
				e = tail + nt;
			fprintf(stderr, "  %.*s\n", (int)(e - p), p);
		}
		if (*logerr)
			fprintf(stderr, "precc-train: (nor could %s be written: %s)\n", logf, logerr);
		exit(1);
	}
}

static void progress(const char *name, int run, int nrun, long s, long n, float loss)
{
	static int tty = -1;
	if (tty < 0)
		tty = isatty(2);
	if (!tty)
		return;
	int w = 30, done = (int)(w * s / (n ? n : 1));
	fprintf(stderr, "\r[%.*s%*s] %d/%d %-24s step %ld/%ld  loss %.4g ", done,
	        "##############################", w - done, "", run + 1, nrun, name, s, n,
	        loss);
	if (s == n && run + 1 == nrun)
		fprintf(stderr, "\n");
	fflush(stderr);
}

/* The mean of the last 10 losses: one batch is noisy. */
static double final_loss(const Run *r)
{
	double s = 0;
	long k = r->steps < 10 ? r->steps : 10;
	for (long i = r->steps - k; i < r->steps; i++)
		s += r->loss[i];
	return k ? s / k : NAN;
}

int main(int argc, char **argv)
{
	const char *recipes[32], *out = "train-out", *ckpt = NULL, *resume = NULL;
	int nrec = 0, json = 0;
	long steps = 200;
	precc_backend be = PRECC_BACKEND_CPU;
	Config c = {1, 3e-3, 1.0, -1};
	char err[8192];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int more = 1;
		if (!strcmp(a, "--recipe") && v && nrec < 32)
			recipes[nrec++] = v;
		else if (!strcmp(a, "--steps") && v)
			steps = atol(v);
		else if (!strcmp(a, "--out") && v)
			out = v;
		else if (!strcmp(a, "--checkpoint") && v)
			ckpt = v;
		else if (!strcmp(a, "--resume") && v)
			resume = v;
		else if (!strcmp(a, "--backend") && v) {
			if (precc_backend_parse(v, &be))
				die("%s", precc_rt_last_error(), "");
		} else if (!strcmp(a, "--seed") && v)
			c.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--lr") && v)
			c.lr = atof(v);
		else if (!strcmp(a, "--max-norm") && v)
			c.max_norm = atof(v);
		else if (!strcmp(a, "--inject-nan") && v)
			c.inject_nan = atol(v);
		else if (!strcmp(a, "--json")) {
			json = 1;
			more = 0;
		} else
			usage();
		i += more;
	}
	if (steps < 0 || !(c.lr > 0))
		usage();
	if (!nrec)
		recipes[nrec++] = "bf16";

	char path[4096], model[4096], dir[4200];
	if (mkdir(out, 0755) && errno != EEXIST)
		die("cannot create '%s': %s", out, strerror(errno));
	snprintf(model, sizeof model, "%s/mlp.lua", out);
	snprintf(dir, sizeof dir, "%s/art", out);
	if (write_model(model) || (mkdir(dir, 0755) && errno != EEXIST))
		die("cannot write '%s' or '%s/art'", model, out);

	int nr = nrec + 1;
	Run *runs = calloc((size_t)nr, sizeof *runs);
	for (int i = 0; i < nrec; i++) {
		char name[128], adir[4400];
		find_recipe(recipes[i], path, sizeof path, name, sizeof name);
		for (int j = 0; j < i; j++)
			if (!strcmp(runs[j].name, name))
				die("recipe '%s' given twice", name, "");
		snprintf(adir, sizeof adir, "%s/%s", dir, name);
		build(path, model, adir);
		if (run_open(&runs[i], name, adir, be, &c, err, sizeof err))
			die("%s: %s", name, err);
	}
	if (run_open(&runs[nrec], "fp32", NULL, be, &c, err, sizeof err))
		die("fp32: %s", err, "");
	if (resume && ckpt_load(runs, nr, &c, resume, err, sizeof err))
		die("cannot resume from '%s': %s", resume, err);

	long first = runs[0].steps;
	for (int i = 0; i < nr; i++) {
		Run *r = &runs[i];
		for (long s = 0; s < steps; s++) {
			if (run_step(r, &c, err, sizeof err))
				die("%s: %s", r->name, err);
			progress(r->name, i, nr, s + 1, steps, r->loss[r->steps - 1]);
		}
	}
	if (ckpt && ckpt_save(runs, nr, &c, ckpt, err, sizeof err))
		die("cannot write the checkpoint '%s': %s", ckpt, err);
	snprintf(path, sizeof path, "%s/loss.svg", out);
	if (runs[0].steps && write_svg(path, runs, nr))
		die("cannot write '%s'%s", path, "");

	const Run *ref = &runs[nrec];
	double fref = final_loss(ref);
	if (json) {
		printf("{\"model\": \"mlp %dx%dx%d\", \"batch\": %d, \"floor\": %.9g, "
		       "\"first_step\": %ld, \"steps\": %ld, \"recipes\": [", DIN, HID,
		       DOUT, BATCH, LOSS_FLOOR, first + 1, runs[0].steps);
		for (int i = 0; i < nr; i++) {
			const Run *r = &runs[i];
			if (i == nrec)
				printf("], \"fp32\": ");
			else if (i)
				printf(", ");
			printf("{\"name\": \"%s\", \"loss\": [", r->name);
			for (long s = 0; s < r->steps; s++)
				printf("%s%.9g", s ? ", " : "", r->loss[s]);
			printf("], \"final\": %.9g", final_loss(r));
			if (!r->ref)
				printf(", \"vs_fp32\": %.6g, \"skipped\": %ld, \"nonfinite\": %ld, "
				       "\"loss_scale\": %.9g, \"dy_flushed\": %.6g",
				       (final_loss(r) - fref) / fref, r->scaler.skipped, r->nonfinite,
				       r->scaler.scale, r->dy_nonzero ? r->dy_flushed / r->dy_nonzero : 0);
			printf("}");
		}
		printf("}\n");
	} else {
		printf("precc-train: MLP %dx%dx%d, batch %d, steps %ld..%ld, backend %s, "
		       "loss floor %.3g\n", DIN, HID, DOUT, BATCH, first + 1, runs[0].steps,
		       precc_backend_name(runs[0].rt ? precc_rt_backend(runs[0].rt) : be),
		       LOSS_FLOOR);
		printf("%-26s %12s %9s %8s %10s %12s %10s\n", "recipe", "final loss", "vs fp32",
		       "skipped", "nonfinite", "loss scale", "dy to 0");
		for (int i = 0; i < nr; i++) {
			const Run *r = &runs[i];
			if (r->ref)
				printf("%-26s %12.4g\n", r->name, fref);
			else
				printf("%-26s %12.4g %+8.2f%% %8ld %10ld %12g %9.2f%%\n", r->name,
				       final_loss(r), (final_loss(r) - fref) / fref * 100,
				       r->scaler.skipped, r->nonfinite, r->scaler.scale,
				       r->dy_nonzero ? 100 * r->dy_flushed / r->dy_nonzero : 0);
		}
		printf("(final loss: the mean of the last 10 steps; dy to 0: the loss gradients "
		       "the recipe's dY format rounds to zero) plot: %s\n", path);
	}
	for (int i = 0; i < nr; i++)
		run_close(&runs[i]);
	free(runs);
	return 0;
}
