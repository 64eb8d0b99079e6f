/*
 * build.c — precc build: a recipe x model through the passes to one PTX
 * (and, with ptxas, one cubin) per distinct kernel per target, the
 * manifest.json that precc_rt reads, and generated C launchers
 * (docs/artifacts.md). Kernels are named and deduplicated by their content
 * hash and kept in the kernel cache (cache.c); misses are compiled on
 * --jobs threads, each with its own LLVM context, ptxas as a child process.
 * --emit prints one layer's kernels at one stage instead.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "build.h"
#include "group.h"
#include "cache.h"
#include "cli.h"
#include "codegen.h"
#include "ir.h"
#include "passes.h"
#include "recipe.h"
#include "precc/version.h"

extern char **environ;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU ms of this thread (CLOCK_THREAD_CPUTIME_ID) or this process */
static double
cpu_ms(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts))
		return 0;
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double
tv_ms(struct timeval tv)
{
	return tv.tv_sec * 1e3 + tv.tv_usec / 1e3;
}

static void
help(FILE *f)
{
	fputs("usage: precc build RECIPE --model MODEL --target sm_90a[,sm_89,...] -o DIR\n"
	      "                   [--no-cache] [--jobs N] [--time] [--stats] [--stats-m N] [--json]\n"
	      "                   [--cluster 1x1|2x1|auto]\n"
	      "       precc build RECIPE --model MODEL --emit=ir|llvm|ptx [--layer PATTERN]\n"
	      "                   [--target T] [--cluster C]\n\n"
	      "Compile every distinct kernel of a recipe x model for each target and write\n"
	      "the artifact directory precc_rt loads (docs/artifacts.md): manifest.json,\n"
	      "<kernel>.<sm>.ptx, <kernel>.<sm>.cubin (when ptxas is found: $PRECC_PTXAS,\n"
	      "$CUDA_HOME/bin, PATH, then /usr/local/cuda/bin), precc_kernels.h and precc_kernels.c.\n"
	      "Kernels are cached by content hash under $PRECC_CACHE_DIR (default\n"
	      "$XDG_CACHE_HOME/precc or ~/.cache/precc).\n\n"
	      "  RECIPE             a recipe file (.lua)\n"
	      "  --model MODEL      a Lua model file (.lua) or a HuggingFace config.json\n"
	      "  --target T[,T...]  sm_89, sm_90, sm_90a (default sm_90a)\n"
	      "  -o DIR             the artifact directory (made if missing)\n"
	      "  --emit=STAGE       print the kernels of the layers matching --layer at\n"
	      "                     STAGE (ir: after the passes, llvm: after O3, ptx) to\n"
	      "                     stdout, for the first target; writes nothing\n"
	      "  --layer PATTERN    with --emit: a shell glob on the whole FQN when it has\n"
	      "                     * ? or [, otherwise a substring\n"
	      "  --no-cache         neither read nor write the kernel cache\n"
	      "  --jobs N, -j N     compile on N threads (default: the CPUs this process\n"
	      "                     may run on); the output does not depend on N\n"
	      "  --time             per-kernel LLVM and ptxas times (wall and CPU) and\n"
	      "                     schedule ([#rank est ms, worker, start-end ms]), cache\n"
	      "                     hits, the phases' wall and CPU ms, the kernels per\n"
	      "                     target and shape (also PRECC_TIME=1), on stderr\n"
	      "  --stats            per kernel at M rows (default 8192): bytes read and\n"
	      "                     written vs the minimum, registers, shared memory,\n"
	      "                     CTAs per SM on sm_90; per layer and model totals;\n"
	      "                     a table on stderr, the figures in manifest.json\n"
	      "  --stats-m N        --stats at M = N\n"
	      "  --cluster C        the sm_90a wgmma GEMMs' thread-block clusters: 1x1 (the\n"
	      "                     default), 2x1 (two CTAs along M share B's tile by TMA\n"
	      "                     multicast, wherever the kernel takes it) or auto\n"
	      "                     (DeepGEMM's rule; docs/passes.md); --stats shows each\n"
	      "  --json             the build's summary as one JSON object on stdout\n"
	      "                     instead of its line on stderr (docs/artifacts.md)\n"
	      "  --help             this text\n\n"
	      "exit status: 0 success, 1 user error (bad recipe or model, unwritable\n"
	      "directory, a kernel codegen or ptxas rejects), 2 bad usage\n", f);
}

/* ---- small helpers ------------------------------------------------------ */

static void
job_fail(Job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!j->err && vasprintf(&j->err, fmt, ap) < 0)
		j->err = NULL;
	va_end(ap);
	if (!j->err)
		j->err = xstrdup("precc: error: out of memory");
}

/* Writes dir/name whole or not at all: a mkstemp file ".name.XXXXXX" in
 * dir, written and renamed over name, so no reader (ptxas, precc_rt) sees
 * a file half written, and a full disk (ENOSPC from write or close) is an
 * error naming shown/name, not a short file. dir is the build's stage,
 * shown the -o the user named; publish_commit syncs the stage once (an
 * fsync per file cost 4-8 ms each on a busy ext4). */
static int
write_file(const char *dir, const char *shown, const char *name, const void *p, size_t n,
           char *err, size_t errsz)
{
	char path[4200], tmp[4300];
	const unsigned char *b = p;
	int fd;

	snprintf(path, sizeof path, "%s/%s", shown, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
	if ((fd = mkstemp(tmp)) < 0) {
		snprintf(err, errsz, "%s: error: cannot write: %s", path, strerror(errno));
		return -1;
	}
	for (size_t left = n; left;) {
		ssize_t k = write(fd, b, left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			goto fail;
		b += k;
		left -= (size_t)k;
	}
	if (fchmod(fd, 0644) || close(fd)) {
		fd = -1;
		goto fail;
	}
	char dst[4200];
	snprintf(dst, sizeof dst, "%s/%s", dir, name);
	if (rename(tmp, dst)) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	snprintf(err, errsz, "%s: error: cannot write: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/* Builds into one -o take turns: an exclusive flock on DIR/.precc.lock,
 * held until exit, so one build at a time stages, sweeps and publishes
 * (publish.c) and the last build wins whole. A publish swaps -o for a new
 * directory holding a hard link of the same lock file; a lock taken on a
 * file no longer at DIR/.precc.lock (a swap without it) is taken again. */
static void
lock_out(const char *dir)
{
	char path[4200];
	struct stat held, now;
	int fd;

	snprintf(path, sizeof path, "%s/.precc.lock", dir);
	for (;;) {
		if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
			errorf(path, 0, "cannot lock the output directory: %s", strerror(errno));
		while (flock(fd, LOCK_EX) && errno == EINTR)
			;
		if (fstat(fd, &held) || stat(path, &now)
		    || (held.st_ino == now.st_ino && held.st_dev == now.st_dev))
			break;
		close(fd);
	}
	/* fd stays open: the lock goes with the process */
}

static int
mkdir_p(const char *dir)
{
	char buf[4096];

	snprintf(buf, sizeof buf, "%s", dir);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0777) && errno != EEXIST)
				return -1;
			*p = '/';
		}
	if (mkdir(buf, 0777) && errno != EEXIST)
		return -1;
	struct stat st;
	if (stat(buf, &st))
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return access(buf, W_OK | X_OK);
}

/* $PRECC_PTXAS, else $CUDA_HOME/bin/ptxas, else ptxas on PATH, else
 * /usr/local/cuda/bin/ptxas; *from says which (the build summary prints
 * it). $CUDA_HOME set without a ptxas is a note, and the search goes on. */
static void
find_ptxas(char *out, size_t n, const char **from, char *why, size_t whysz)
{
	const char *env = getenv("PRECC_PTXAS"), *home = getenv("CUDA_HOME"), *path = getenv("PATH");
	char cand[4096];

	*out = 0;
	*from = "";
	if (env && *env) {
		if (access(env, X_OK) == 0) {
			snprintf(out, n, "%s", env);
			*from = "PRECC_PTXAS";
		} else
			snprintf(why, whysz, "PRECC_PTXAS=%s: %s", env, strerror(errno));
		return;
	}
	if (home && *home) {
		snprintf(cand, sizeof cand, "%s/bin/ptxas", home);
		if (access(cand, X_OK) == 0) {
			snprintf(out, n, "%s", cand);
			*from = "CUDA_HOME";
			return;
		}
		fprintf(stderr, "precc build: note: CUDA_HOME=%s has no bin/ptxas (%s); "
		                "looking on PATH\n", home, strerror(errno));
	}
	for (const char *p = path; p && *p;) {
		const char *e = strchr(p, ':');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		snprintf(cand, sizeof cand, "%.*s/ptxas", (int)l, l ? p : ".");
		if (access(cand, X_OK) == 0) {
			snprintf(out, n, "%s", cand);
			*from = "PATH";
			return;
		}
		p = e ? e + 1 : NULL;
	}
	if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
		snprintf(out, n, "/usr/local/cuda/bin/ptxas");
		*from = "/usr/local/cuda";
		return;
	}
	snprintf(why, whysz, "not in $CUDA_HOME/bin, on PATH or in /usr/local/cuda/bin; "
	                     "set CUDA_HOME or PRECC_PTXAS");
}

/* The compiler's identity for the cache key: this executable's size and
 * mtime (a rebuilt precc never reads its predecessor's kernels), the LLVM
 * version, and the ptxas used. */
static uint64_t
compiler_identity(const char *ptxas)
{
	uint64_t h = ir_hash_str(IR_HASH_INIT, PRECC_VERSION);
	struct stat st;

	h = ir_hash_str(h, codegen_llvm_version());
	if (stat("/proc/self/exe", &st) == 0) {
		h = ir_hash_bytes(h, &st.st_size, sizeof st.st_size);
		h = ir_hash_bytes(h, &st.st_mtim, sizeof st.st_mtim);
	}
	h = ir_hash_str(h, *ptxas ? ptxas : "no ptxas");
	if (*ptxas && stat(ptxas, &st) == 0) {
		h = ir_hash_bytes(h, &st.st_size, sizeof st.st_size);
		h = ir_hash_bytes(h, &st.st_mtim, sizeof st.st_mtim);
	}
	return h;
}

static uint64_t
model_identity(const Model *md)
{
	uint64_t h = ir_hash_str(IR_HASH_INIT, md->name ? md->name : "");

	for (int i = 0; i < md->nlinears; i++) {
		const Linear *l = &md->linears[i];
		long v[5] = {l->in_features, l->out_features, l->tied, l->bias, l->shares_input};
		h = ir_hash_str(h, l->fqn);
		h = ir_hash_bytes(h, v, sizeof v);
	}
	return h;
}

static uint64_t
file_identity(const char *path)
{
	size_t n = 0;
	unsigned char *b = (unsigned char *)read_file(path, 0, &n, NULL);
	uint64_t h = b ? ir_hash_bytes(IR_HASH_INIT, b, n) : ir_hash_str(IR_HASH_INIT, path);

	free(b);
	return h;
}

static const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* "llama-3-8b.json" -> "llama-3-8b" */
static char *
stem(const char *path)
{
	char *s = xstrdup(base_name(path)), *dot = strrchr(s, '.');

	if (dot && dot != s)
		*dot = 0;
	return s;
}

/* ---- ptxas -------------------------------------------------------------- */

static long
scan_after(const char *log, const char *word, int before)
{
	/* ptxas -v: "Used 24 registers", "0 bytes spill stores" */
	long best = -1;

	for (const char *p = log; (p = strstr(p, word)); p += strlen(word)) {
		long v;
		if (before) {
			const char *q = p;
			while (q > log && q[-1] == ' ')
				q--;
			while (q > log && q[-1] >= '0' && q[-1] <= '9')
				q--;
			v = strtol(q, NULL, 10);
		} else
			v = strtol(p + strlen(word), NULL, 10);
		if (v > best)
			best = v;
	}
	return best;
}

/* ptxas's output (the -v figures, or why it rejects the PTX), read
 * through a pipe: a log file beside the cubin went short on a full disk,
 * and a kernel with "regs": -1 was sealed into the cache. */
static char *
read_pipe(int fd)
{
	char *text = NULL, buf[4096];
	size_t n = 0;
	FILE *m = open_memstream(&text, &n);
	ssize_t k;

	while ((k = read(fd, buf, sizeof buf)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		fwrite(buf, 1, (size_t)k, m);
	}
	fclose(m);
	return text;
}

/* ptxas ptxpath -> cubinpath (temporaries); errors name the kernel's file
 * in -o, shown. -1: ptxas rejected the PTX; -2: it did not run, or its
 * cubin cannot be trusted. */
static int
run_ptxas(Build *b, Job *j, const char *ptxpath, const char *cubinpath, const char *shown)
{
	char arch[32];
	const char *sm = b->tg[j->t]->name;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = 0, rc, fd[2];
	double t0 = now_ms();

	snprintf(arch, sizeof arch, "-arch=%s", sm);
	char *argv[] = {b->ptxas, "-v", arch, "-o", (char *)cubinpath, (char *)ptxpath, NULL};
	/* O_CLOEXEC: another worker's ptxas must not hold this pipe open */
	if (pipe2(fd, O_CLOEXEC)) {
		job_fail(j, "precc: error: cannot run %s: %s", b->ptxas, strerror(errno));
		return -2;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
	rc = posix_spawn(&pid, b->ptxas, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (rc) {
		close(fd[0]);
		job_fail(j, "precc: error: cannot run %s: %s", b->ptxas, strerror(rc));
		return -2;
	}
	char *text = read_pipe(fd[0]);
	close(fd[0]);
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
		;
	j->ptxas_ms = now_ms() - t0;
	j->ptxas_cpu_ms = tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		job_fail(j, "precc: error: ptxas rejected %s (%s):\n%s", shown,
		         j->f->name, text ? text : "");
		free(text);
		return -1;
	}
	j->e.regs = text ? (int)scan_after(text, "Used ", 0) : -1;
	long spills = text ? scan_after(text, " bytes spill stores", 1) : -1;
	long loads = text ? scan_after(text, " bytes spill loads", 1) : -1;
	j->e.spill_bytes = spills > loads ? (int)spills : (int)loads;
	free(text);
	free(j->e.cubin);
	j->e.cubin = (unsigned char *)read_file(cubinpath, 0, &j->e.cubin_len, NULL);
	if (!j->e.cubin) {
		job_fail(j, "precc: error: ptxas exited 0 but wrote no cubin for %s (%s)", shown, j->f->name);
		return -2;
	}
	/* ptxas 13.0 exits 0 on a full disk, its cubin cut short: what is
	 * not a whole CUDA ELF fails the build and is neither written to -o
	 * nor sealed into the cache */
	const char *why = cache_cubin_check(j->e.cubin, j->e.cubin_len);
	if (why) {
		job_fail(j, "precc: error: ptxas exited 0 but its cubin for %s (%s) is malformed: "
		         "%s (%zu bytes; a full disk?)", shown, j->f->name, why, j->e.cubin_len);
		free(j->e.cubin);
		j->e.cubin = NULL;
		j->e.cubin_len = 0;
		return -2;
	}
	return 0;
}

/* ---- compiling ---------------------------------------------------------- */

static void
progress(Build *b)
{
	int w = 30, fill;

	if (!b->progress)
		return;
	fill = b->njobs ? b->done * w / b->njobs : w;
	fputc('\r', stderr);
	fputc('[', stderr);
	for (int i = 0; i < w; i++)
		fputc(i < fill ? '=' : i == fill ? '>' : ' ', stderr);
	fprintf(stderr, "] %d/%d kernels", b->done, b->njobs);
	if (b->done == b->njobs)
		fputc('\n', stderr);
	fflush(stderr);
}

/* Whether a and b number their values alike: the launch info's
 * param_value of one is the other's (kernels of one canonical text). */
static int
same_values(const Func *a, const Func *b)
{
	if (a->nval != b->nval || a->nins != b->nins)
		return 0;
	for (int i = 0; i < a->nins; i++) {
		const Ins *x = &a->ins[i], *y = &b->ins[i];
		if (x->res != y->res || x->narg != y->narg
		    || memcmp(x->arg, y->arg, sizeof *x->arg * (size_t)x->narg))
			return 0;
	}
	return 1;
}

/* j and o take their columns at run time and differ only in them. */
static int
cols_twin(const Job *j, const Job *o)
{
	return j->chash && o->chash == j->chash && same_values(j->f, o->f);
}

/* j may take o's LLVM module (its PTX): the same kernel for another
 * target, or the same but for its columns on any target */
static int
llvm_twin(const Job *j, const Job *o)
{
	return (o->xhash == j->xhash && o->t != j->t) || cols_twin(j, o);
}

/* LLVM runs once per kernel built for several of sm_89, sm_90 and sm_90a.
 * A kernel's canonical text (ir_func_hash without the target) fixes the
 * LLVM module codegen makes: the one target-dependent choice, wgmma, is
 * the op's mma= attribute, so in the text. NVPTX's subtargets then
 * differ only in the `.target` line for every kernel of the shipped
 * recipes (134 pairs on Llama-3-70B; tests/lit/build/share.test checks
 * every recipe against PRECC_SHARE_PTX=0, which turns this off). A kernel
 * that takes its columns at run time (chash) has the LLVM module of every
 * kernel whose text differs from its own only in the columns (NVFP4's dY
 * quantize at K = 1024, 8192 and 28672), on any target. 1: j took an
 * earlier job's PTX and launch info, its .target rewritten; 0: j runs
 * LLVM itself and then calls llvm_release. */
static int
llvm_share(Build *b, Job *j)
{
	if (!b->share_ptx)
		return 0;
	pthread_mutex_lock(&b->mu);
	for (;;) {
		const Job *o = NULL;
		for (int k = 0; k < b->njobs && !o; k++) {
			const Job *c = &b->jobs[k];
			if (c != j && c->llvm_state && c->llvm_state != 3
			    && llvm_twin(j, c))
				o = c;
		}
		if (!o) {
			j->llvm_state = 1;
			pthread_mutex_unlock(&b->mu);
			return 0;
		}
		if (o->llvm_state == 2) {
			const char *from = b->tg[o->t]->name, *to = b->tg[j->t]->name;
			char line[64];
			snprintf(line, sizeof line, "\n.target %s\n", from);
			const char *at = strstr(o->e.ptx, line);   /* the same target: from == to */
			if (!at) {              /* not the PTX we know: compile it */
				j->llvm_state = 1;
				pthread_mutex_unlock(&b->mu);
				return 0;
			}
			size_t head = (size_t)(at - o->e.ptx) + 9, tail = head + strlen(from);
			size_t n = head + strlen(to) + (o->e.ptx_len - tail);
			j->e.ptx = xmalloc(n + 1);
			memcpy(j->e.ptx, o->e.ptx, head);
			memcpy(j->e.ptx + head, to, strlen(to));
			memcpy(j->e.ptx + head + strlen(to), o->e.ptx + tail, o->e.ptx_len - tail + 1);
			j->e.ptx_len = n;
			j->e.info = o->e.info;
			j->e.info.llvm_ms = 0;
			j->ptx_of = (int)(o - b->jobs);
			j->llvm_state = 2;
			pthread_mutex_unlock(&b->mu);
			return 1;
		}
		pthread_cond_wait(&b->ptxas_done, &b->mu);
	}
}

static void
llvm_release(Build *b, Job *j, int ok)
{
	if (!b->share_ptx)
		return;
	pthread_mutex_lock(&b->mu);
	j->llvm_state = ok ? 2 : 3;
	pthread_cond_broadcast(&b->ptxas_done);
	pthread_mutex_unlock(&b->mu);
}

/* ptxas runs once per distinct PTX text of a target: kernels whose IR
 * differs (value names, an accumulation mode codegen reads the same way,
 * an m_variant's name) often come out of LLVM as the same PTX, and ptxas
 * gives the same cubin for the same input. 1: j took the cubin, registers
 * and spills of an earlier job with the same PTX; 0: j runs ptxas itself
 * (the first with this PTX, or the first one failed), and then calls
 * ptxas_release. */
static int
ptxas_share(Build *b, Job *j)
{
	j->ptx_hash = ir_hash_bytes(ir_hash_str(IR_HASH_INIT, b->tg[j->t]->name), j->e.ptx,
	                            j->e.ptx_len);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		const Job *o = NULL;
		for (int k = 0; k < b->njobs && !o; k++) {
			const Job *c = &b->jobs[k];
			if (c != j && c->ptxas_state && c->t == j->t && c->ptx_hash == j->ptx_hash
			    && c->e.ptx_len == j->e.ptx_len && !memcmp(c->e.ptx, j->e.ptx, j->e.ptx_len)
			    && c->ptxas_state != 3)
				o = c;
		}
		if (!o) {
			j->ptxas_state = 1;
			pthread_mutex_unlock(&b->mu);
			return 0;
		}
		if (o->ptxas_state == 2) {
			j->cubin_of = (int)(o - b->jobs);
			j->e.regs = o->e.regs;
			j->e.spill_bytes = o->e.spill_bytes;
			j->e.cubin_len = o->e.cubin_len;
			j->e.cubin = xmalloc(o->e.cubin_len ? o->e.cubin_len : 1);
			memcpy(j->e.cubin, o->e.cubin, o->e.cubin_len);
			j->ptxas_state = 2;
			pthread_mutex_unlock(&b->mu);
			return 1;
		}
		pthread_cond_wait(&b->ptxas_done, &b->mu);
	}
}

static void
ptxas_release(Build *b, Job *j, int ok)
{
	pthread_mutex_lock(&b->mu);
	j->ptxas_state = ok ? 2 : 3;
	pthread_cond_broadcast(&b->ptxas_done);
	pthread_mutex_unlock(&b->mu);
}

static void
compile_job(Build *b, Job *j)
{
	char ptxname[64], ptxpath[4200];
	const char *sm = b->tg[j->t]->name;

	snprintf(ptxname, sizeof ptxname, "%s.%s.ptx", j->name, sm);
	snprintf(ptxpath, sizeof ptxpath, "%s/%s", b->out, ptxname);   /* as errors name it */
	if (!j->hit && !llvm_share(b, j)) {
		CodegenTarget ct = {b->sm[j->t], 0};
		char err[1024];
		double c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
		int bad = codegen_kernel_ptx(j->f, &ct, &j->e.ptx, &j->e.info, err, sizeof err);
		j->llvm_cpu_ms = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (!bad)
			j->e.ptx_len = strlen(j->e.ptx);
		llvm_release(b, j, !bad);
		if (bad) {
			job_fail(j, "precc: error: %s", err);
			return;
		}
	}
	if (!j->hit)
		j->e.regs = j->e.spill_bytes = -1;
	char werr[4400];
	if (*b->ptxas && !j->e.cubin && !ptxas_share(b, j)) {
		/* ptxas reads and writes this build's own temporaries; the
		 * results are renamed into place below like every other file */
		char tptx[4300], tcubin[4400];
		int fd;
		snprintf(tptx, sizeof tptx, "%s/.%s.XXXXXX", b->stage, ptxname);
		if ((fd = mkstemp(tptx)) < 0 || close(fd)) {
			job_fail(j, "%s: error: cannot write: %s", ptxpath, strerror(errno));
			ptxas_release(b, j, 0);
			return;
		}
		snprintf(tcubin, sizeof tcubin, "%s.cubin", tptx);
		FILE *f = fopen(tptx, "wb");
		int bad = !f || fwrite(j->e.ptx, 1, j->e.ptx_len, f) != j->e.ptx_len;
		if ((f && fclose(f)) || bad) {
			job_fail(j, "%s: error: cannot write: %s", ptxpath, strerror(errno));
			unlink(tptx);
			ptxas_release(b, j, 0);
			return;
		}
		int rc = run_ptxas(b, j, tptx, tcubin, ptxpath);
		unlink(tptx);
		unlink(tcubin);
		ptxas_release(b, j, rc == 0);
		if (rc == -1)   /* the PTX ptxas rejected goes to -o itself, to be
				 * read; the build fails and its stage with it */
			write_file(b->out, b->out, ptxname, j->e.ptx, j->e.ptx_len, werr, sizeof werr);
		if (rc)
			return;
	}
	if (write_file(b->stage, b->out, ptxname, j->e.ptx, j->e.ptx_len, werr, sizeof werr)) {
		job_fail(j, "%s", werr);
		return;
	}
	if (j->e.cubin) {
		char name[64];
		snprintf(name, sizeof name, "%s.%s.cubin", j->name, sm);
		if (write_file(b->stage, b->out, name, j->e.cubin, j->e.cubin_len, werr, sizeof werr)) {
			job_fail(j, "%s", werr);
			return;
		}
	}
	if (!j->hit || j->reptxas)
		cache_put(b->cache, j->key, &j->e);
}

/* Job order[k] on worker w, its start and end kept for --time. */
static void
run_job(Build *b, int k, int w)
{
	Job *j = &b->jobs[b->order[k]];

	j->worker = w;
	j->t0 = now_ms() - b->t_kernels;
	compile_job(b, j);
	j->t1 = now_ms() - b->t_kernels;
}

static void *
worker(void *arg)
{
	Build *b = arg;

	pthread_mutex_lock(&b->mu);
	int w = b->nworker++;
	pthread_mutex_unlock(&b->mu);
	for (;;) {
		pthread_mutex_lock(&b->mu);
		int k = b->next < b->njobs ? b->next++ : -1;
		pthread_mutex_unlock(&b->mu);
		if (k < 0)
			return NULL;
		run_job(b, k, w);
		pthread_mutex_lock(&b->mu);
		b->done++;
		progress(b);
		pthread_mutex_unlock(&b->mu);
	}
}

/* A job's compile work in estimated CPU ms of LLVM + ptxas for one target,
 * from its kernel func's ops, fitted to the per-kernel CPU of cold 70B
 * builds at sm_90a + sm_89 (bench/RESULTS.md, "Compile time per recipe";
 * bench/compile_time.py prints the estimate beside the measure). The one
 * outlier is a quantize of a Hadamard transform in the same kernel (NVFP4's
 * quant_rowcol, cols_rht: 16 x 16 transforms unrolled per column pair),
 * 0.5-0.8 s where a GEMM takes 0.05-0.26 s. A job that takes its twin's
 * PTX (llvm_share) costs ptxas only; a cache hit without a cubin, ptxas
 * only; a hit, writes. */
static int
job_cost(const Job *j)
{
	int c = 0, had = 0, q = 0;

	if (j->hit && !j->reptxas)
		return 0;
	for (int i = 0; i < j->f->nins; i++) {
		Op op = j->f->ins[i].op;
		c += ir_op_gemm(op) ? 160 : op == OP_quantize ? 50 : op == OP_amax ? 30
		     : op == OP_hadamard ? 30 : op == OP_history_push || op == OP_history_reduce ? 30
		     : op == OP_param ? 0 : 5;
		had |= op == OP_hadamard;
		q |= op == OP_quantize;
	}
	if (had && q)
		c += 450;
	if (j->hit)                     /* ptxas only */
		c /= 2;
	return c;
}

/* 1 if an earlier job is the same kernel for another target, or the same
 * but for its columns on another: j will likely take its PTX (llvm_share)
 * and run ptxas only; 2 if the same but for its columns on j's target: its
 * PTX and its cubin (ptxas_share), nothing to run. */
static int
job_twin(const Build *b, int k)
{
	const Job *j = &b->jobs[k];
	int twin = 0;

	for (int i = 0; b->share_ptx && i < k; i++) {
		const Job *o = &b->jobs[i];
		if (cols_twin(j, o) && o->t == j->t)
			return 2;
		if (llvm_twin(j, o))
			twin = 1;
	}
	return twin;
}

static int
by_cost(const void *pa, const void *pb, void *arg)
{
	const Build *b = arg;
	int a = *(const int *)pa, c = *(const int *)pb;
	int ca = b->jobs[a].cost, cb = b->jobs[c].cost;

	return ca != cb ? (ca < cb) - (ca > cb) : (a > c) - (a < c);
}

/* The workers take the largest jobs first, so the build does not end on
 * one core with a GEMM while the other idles; every file a job writes is
 * its own and the manifest lists jobs in collect_jobs' order, so the
 * artifacts do not depend on the order or on --jobs. */
static void
order_jobs(Build *b)
{
	b->order = xcalloc(b->njobs ? (size_t)b->njobs : 1, sizeof *b->order);
	for (int k = 0; k < b->njobs; k++) {
		b->order[k] = k;
		b->jobs[k].cost = job_cost(&b->jobs[k]);
		int twin = b->jobs[k].hit ? 0 : job_twin(b, k);
		if (twin == 1)
			b->jobs[k].cost /= 2;   /* ptxas only: 0.4-0.5 of the first's */
		else if (twin == 2)
			b->jobs[k].cost = 1;    /* writes only */
	}
	qsort_r(b->order, (size_t)b->njobs, sizeof *b->order, by_cost, b);
	for (int k = 0; k < b->njobs; k++)
		b->jobs[b->order[k]].rank = k;
}

static int
compile_all(Build *b)
{
	int nth = b->jobs_n, nwork = 0;

	for (int k = 0; k < b->njobs; k++) {
		Job *j = &b->jobs[k];
		j->hit = cache_get(b->cache, j->key, &j->e);
		if (j->hit && !cache_entry_fits(&j->e, j->f->nval)) {
			cache_warn(b->cache, j->key, "value index out of range");
			cache_entry_free(&j->e);
			memset(&j->e, 0, sizeof j->e);
			j->hit = 0;
		}
		if (j->hit && *b->ptxas && !j->e.cubin)
			j->reptxas = 1;
		nwork += !j->hit || j->reptxas;
	}
	order_jobs(b);
	b->progress = isatty(2) && nwork > PROGRESS_MIN;
	if (nth > nwork)
		nth = nwork;
	b->t_kernels = now_ms();
	if (nth <= 1) {
		for (int k = 0; k < b->njobs; k++) {
			run_job(b, k, 0);
			b->done++;
			progress(b);
		}
	} else {
		pthread_t *th = xcalloc((size_t)nth, sizeof *th);
		int started = 0;
		for (int i = 0; i < nth; i++)
			if (pthread_create(&th[i], NULL, worker, b) == 0)
				started++;
			else
				break;
		if (!started)
			worker(b);
		for (int i = 0; i < started; i++)
			pthread_join(th[i], NULL);
		free(th);
	}
	int bad = 0;
	for (int k = 0; k < b->njobs; k++) {
		Job *j = &b->jobs[k];
		if (j->err) {
			fprintf(stderr, "%s\n", j->err);
			bad = 1;
		} else if (j->e.spill_bytes > 0)
			/* it runs, but local-memory traffic in a bandwidth-bound
			 * kernel: a user's recipe should hear of it (the shipped
			 * ones have none: codegen.no_spills) */
			fprintf(stderr, "precc build: warning: %s (%s, %s) spills %d bytes at %d registers "
			        "on %s (ptxas -v): it runs, slower\n", j->name,
			        codegen_shape_name(j->e.info.shape), j->f->name, j->e.spill_bytes,
			        j->e.regs, b->tg[j->t]->name);
	}
	return bad ? -1 : 0;
}

/* ---- kernels ------------------------------------------------------------ */

Job *
build_find_job(Build *b, int t, const char *func)
{
	const Func *f = ir_find_func(b->mods[t], func);

	for (int k = 0; f && k < b->nkmap; k++)
		if (b->kmap[k].f == f)
			return &b->jobs[b->kmap[k].job];
	return NULL;
}

/* One job per distinct kernel x target: kernels with the same content hash
 * (in one module or across targets) share a job. */
static void
collect_jobs(Build *b, uint64_t ident)
{
	int cap = 0, kcap = 0;

	for (int t = 0; t < b->ntg; t++) {
		const Module *m = b->mods[t];
		for (int i = 0; i < m->nfn; i++) {
			const Func *f = m->fn[i];
			if (!f->kernel)
				continue;
			uint64_t h = ir_func_hash(f, b->tg[t]->name);
			char name[24];
			int k;
			snprintf(name, sizeof name, "k_%016llx", (unsigned long long)h);
			for (k = 0; k < b->njobs; k++)
				if (!strcmp(b->jobs[k].name, name))
					break;
			if (k == b->njobs) {
				if (b->njobs == cap)
					b->jobs = xrealloc(b->jobs, (size_t)(cap = cap ? cap * 2 : 64)
					                            * sizeof *b->jobs);
				Job *j = &b->jobs[b->njobs++];
				memset(j, 0, sizeof *j);
				j->cubin_of = j->ptx_of = -1;
				j->f = f;
				j->xhash = ir_func_hash(f, NULL);
				j->t = t;
				CodegenTarget ct = {b->sm[t], 0};
				if (codegen_kernel_cols(f, &ct, &j->cols)) {
					Func *mf = ir_func_recols(f, j->cols, 0);
					j->chash = ir_func_hash(mf, "columns at run time");
					ir_func_recols_free(mf);
				} else
					j->cols = 0;
				snprintf(j->name, sizeof j->name, "%s", name);
				j->key = ir_hash_str(ir_hash_bytes(ident, &h, sizeof h), b->tg[t]->name);
			}
			if (b->nkmap == kcap)
				b->kmap = xrealloc(b->kmap, (size_t)(kcap = kcap ? kcap * 2 : 64)
				                            * sizeof *b->kmap);
			b->kmap[b->nkmap].f = f;
			b->kmap[b->nkmap++].job = k;
		}
	}
}

/* ---- whole-build cache entries -------------------------------------------
 * A build of the same recipe bytes, model and targets by the same compiler
 * makes the same artifacts: its entry holds the three generated files and
 * the cache keys of its kernels, so a warm build skips lowering and the
 * passes. Any kernel entry missing or corrupt: the build runs in full. */

static const char *const gen_files[3] = {"manifest.json", "precc_kernels.h", "precc_kernels.c"};

static uint64_t
build_key(const Build *b, uint64_t ident, const char *rname, const char *mname)
{
	uint64_t h = ir_hash_str(ident, "build");

	h = ir_hash_str(h, rname);      /* the manifest names them */
	h = ir_hash_str(h, mname);

	h = ir_hash_bytes(h, &b->recipe_hash, 8);
	h = ir_hash_bytes(h, &b->model_hash, 8);
	for (int t = 0; t < b->ntg; t++)
		h = ir_hash_str(h, b->tg[t]->name);
	if (b->stats_m)                 /* the manifest then carries the figures */
		h = ir_hash_bytes(h, &b->stats_m, sizeof b->stats_m);
	if (b->cluster != GEMM_CLUSTER_1X1) {  /* other kernels */
		int c = (int)b->cluster;
		h = ir_hash_bytes(h, &c, sizeof c);
	}
	return h;
}

static void
put_build(Build *b, uint64_t key, char *const text[3])
{
	unsigned char *p = NULL;
	size_t n = 0;
	FILE *m = open_memstream((char **)&p, &n);
	uint32_t nk = (uint32_t)b->njobs;

	if (!m || !b->cache) {
		if (m)
			fclose(m);
		free(p);
		return;
	}
	fwrite(&nk, 4, 1, m);
	for (int k = 0; k < b->njobs; k++) {
		uint32_t t = (uint32_t)b->jobs[k].t;
		fwrite(&b->jobs[k].key, 8, 1, m);
		fwrite(&t, 4, 1, m);
		fwrite(b->jobs[k].name, 1, sizeof b->jobs[k].name, m);
	}
	for (int i = 0; i < 3; i++) {
		uint64_t l = strlen(text[i]);
		fwrite(&l, 8, 1, m);
		fwrite(text[i], 1, l, m);
	}
	fclose(m);
	cache_put_blob(b->cache, key, p, n);
	free(p);
}

/* Removes the kernel files of an earlier build from the stage (when it is
 * -o itself: publish.c's in-place case): regular files named like ours
 * (k_<16 hex>.<sm>.ptx|cubin) that this build did not write, so the
 * directory holds what its manifest lists. */
static void
remove_stale(const Build *b)
{
	DIR *d = opendir(b->stage);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (!publish_kernel_file(n))
			continue;
		const char *dot = strrchr(n, '.');
		int keep = 0;
		for (int k = 0; k < b->njobs && !keep; k++) {
			const Job *j = &b->jobs[k];
			char want[64];
			snprintf(want, sizeof want, "%s.%s%s", j->name, b->tg[j->t]->name, dot);
			keep = !strcmp(want, n) && (!strcmp(dot, ".ptx") || j->e.cubin);
		}
		if (!keep) {
			char path[sizeof b->stage + 257];   /* stage / a d_name */
			struct stat st;
			snprintf(path, sizeof path, "%s/%s", b->stage, n);
			if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
				unlink(path);
		}
	}
	closedir(d);
}

/* A job name from a cache entry: exactly k_<16 lowercase hex>, as
 * collect_jobs makes them (no '/', no "..": it is a file name under -o). */
static int
job_name_ok(const char *n)
{
	if (strncmp(n, "k_", 2) || strlen(n) != 18)
		return 0;
	for (int i = 2; i < 18; i++)
		if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
			return 0;
	return 1;
}

/* 1: the whole build came from the cache and its files are written. */
static int
get_build(Build *b, uint64_t key, char *err, size_t errsz)
{
	size_t n = 0, at = 4;
	unsigned char *p = cache_get_blob(b->cache, key, &n);
	uint32_t nk;
	char *text[3] = {NULL, NULL, NULL};
	int ok = 0;

	const char *why = "malformed build entry";
	if (!p)
		return 0;
	if (n < 4)
		goto out;
	memcpy(&nk, p, 4);
	if (nk > (n - 4) / 36 || nk > CACHE_MAX_JOBS)
		goto out;
	b->jobs = xcalloc(nk ? nk : 1, sizeof *b->jobs);
	for (uint32_t k = 0; k < nk; k++, b->njobs++) {
		Job *j = &b->jobs[k];
		uint32_t t;
		j->cubin_of = j->ptx_of = -1;
		memcpy(&j->key, p + at, 8);
		memcpy(&t, p + at + 8, 4);
		memcpy(j->name, p + at + 12, sizeof j->name);
		at += 12 + sizeof j->name;
		j->name[sizeof j->name - 1] = 0;
		/* the name becomes a file name under -o: k_<16 hex> and nothing else */
		if (!job_name_ok(j->name)) {
			why = "job name is not k_<16 hex>";
			goto out;
		}
		if (t >= (uint32_t)b->ntg)
			goto out;
		if (!cache_get(b->cache, j->key, &j->e)) {
			why = NULL;          /* cache_get warned, or a plain miss */
			goto out;
		}
		j->t = (int)t;
		j->hit = 1;
	}
	for (int i = 0; i < 3; i++) {
		uint64_t l;
		if (n - at < 8)
			goto out;
		memcpy(&l, p + at, 8);
		at += 8;
		if (l > n - at || l > CACHE_MAX_TEXT)
			goto out;
		text[i] = xmalloc(l + 1);
		memcpy(text[i], p + at, l);
		text[i][l] = 0;
		at += l;
	}
	if (at != n)
		goto out;
	why = NULL;
	ok = 1;
	for (int k = 0; k < b->njobs && ok == 1; k++) {
		Job *j = &b->jobs[k];
		char name[64];
		snprintf(name, sizeof name, "%s.%s.ptx", j->name, b->tg[j->t]->name);
		if (write_file(b->stage, b->out, name, j->e.ptx, j->e.ptx_len, err, errsz))
			ok = -1;
		snprintf(name, sizeof name, "%s.%s.cubin", j->name, b->tg[j->t]->name);
		if (ok == 1 && j->e.cubin
		    && write_file(b->stage, b->out, name, j->e.cubin, j->e.cubin_len, err, errsz))
			ok = -1;
	}
	for (int i = 0; i < 3 && ok == 1; i++)
		if (write_file(b->stage, b->out, gen_files[i], text[i], strlen(text[i]), err, errsz))
			ok = -1;
	if (ok == 1)
		remove_stale(b);
out:
	if (!ok && why)
		cache_warn(b->cache, key, why);
	for (int i = 0; i < 3; i++)
		free(text[i]);
	free(p);
	if (!ok) {
		for (int k = 0; k < b->njobs; k++)
			cache_entry_free(&b->jobs[k].e);
		free(b->jobs);
		b->jobs = NULL;
		b->njobs = 0;
	}
	return ok;
}

/* ---- --emit ------------------------------------------------------------- */

static int
emit(Build *b)
{
	const Module *m = b->mods[0];
	int rc = 0;
	char **done = xcalloc((size_t)m->nfn + 1, sizeof *done);
	int ndone = 0;

	for (int i = 0; i < m->nfn && !rc; i++) {
		const Func *f = m->fn[i];
		if (f->kernel)
			continue;
		for (int k = 0; k < f->nins && !rc; k++) {
			const Ins *in = &f->ins[k];
			int seen = 0;
			if (in->op != OP_call)
				continue;
			for (int d = 0; d < ndone; d++)
				seen |= !strcmp(done[d], in->callee);
			if (seen)
				continue;
			done[ndone++] = in->callee;
			const Func *kf = ir_find_func(m, in->callee);
			if (!kf)
				die("call of unknown kernel @%s", in->callee);
			uint64_t h = ir_func_hash(kf, b->tg[0]->name);
			char name[24], err[1024];
			snprintf(name, sizeof name, "k_%016llx", (unsigned long long)h);
			if (!strcmp(b->emit, "ir")) {
				printf("# %s: %s, first called by %s\n", name, kf->name, f->name);
				ir_print_func(stdout, kf);
				continue;
			}
			CodegenTarget ct = {b->sm[0], 0};
			CodegenKernel info;
			char *text = NULL;
			int llvm = !strcmp(b->emit, "llvm");
			if ((llvm ? codegen_kernel_llvm : codegen_kernel_ptx)(kf, &ct, &text, &info, err,
			                                                      sizeof err)) {
				fprintf(stderr, "precc: error: %s\n", err);
				rc = 1;
				break;
			}
			printf("%s %s: %s, first called by %s\n", llvm ? ";" : "//", name, kf->name, f->name);
			fputs(text, stdout);
			free(text);
		}
	}
	free(done);
	return rc;
}

/* ---- the command -------------------------------------------------------- */

/* --jobs' default: the CPUs this process may run on (its affinity mask,
 * which taskset and cpusets narrow), else the online ones. */
static int
online_cpus(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n < 1)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

static int
parse_targets(Build *b, const char *list)
{
	char buf[256], *tok, *save;

	snprintf(buf, sizeof buf, "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const Target *t = target_by_name(tok);
		int sm = codegen_sm_by_name(tok);
		if (!t || sm < 0)
			return usage_error("build", "unknown target '%s' (targets: %s)", tok, target_names);
		int dup = 0;
		for (int k = 0; k < b->ntg; k++)
			dup |= b->tg[k] == t;
		if (dup)
			continue;
		b->tg[b->ntg] = t;
		b->sm[b->ntg++] = (CodegenSm)sm;
	}
	if (!b->ntg)
		return usage_error("build", "--target needs a target (targets: %s)", target_names);
	return 0;
}

/* --stats on a whole-build cache hit: the manifest already has the
 * figures (the key has M); print them again from it. */
static int
print_stats(Build *b)
{
	char path[4300];
	size_t n = 0;
	snprintf(path, sizeof path, "%s/manifest.json", b->stage);
	char *text = read_file(path, 0, &n, NULL);
	char *st = text ? stats_manifest(text, b->stage, b->stats_m, stderr) : NULL;
	free(text);
	free(st);
	return st ? 0 : -1;
}

/* --time: one line per compiled kernel (wall ms of LLVM and ptxas, then
 * their CPU ms), the phases in wall and CPU ms, the kernels per target and
 * per shape, and how busy the jobs kept the cores. CPU time is the figure
 * to compare on a loaded machine: wall time at --jobs 2 there says more
 * about the other processes than about precc. */
static void
print_times(Build *b, double t0)
{
	int hits = 0, built = 0, ptx = 0;
	double llvm = 0, px = 0, llvm_cpu = 0, px_cpu = 0;

	for (int k = 0; k < b->njobs; k++) {
		const Job *j = &b->jobs[k];
		if (j->hit)
			hits++;
		else if (!j->err) {
			built += j->ptx_of < 0;     /* LLVM runs */
			llvm += j->e.info.llvm_ms;
			fprintf(stderr, "time: %s %-7s %-16s LLVM %7.1f ms", j->name, b->tg[j->t]->name,
			        codegen_shape_name(j->e.info.shape), j->e.info.llvm_ms);
			if (j->ptxas_ms > 0 || j->cubin_of >= 0)
				fprintf(stderr, "  ptxas %7.1f ms", j->ptxas_ms);
			fprintf(stderr, "  %s  cpu: LLVM %.1f ptxas %.1f", j->f->name, j->llvm_cpu_ms,
			        j->ptxas_cpu_ms);
			if (j->ptx_of >= 0)
				fprintf(stderr, "  (the PTX of %s for %s, its .target %s%s)",
				        b->jobs[j->ptx_of].name, b->tg[b->jobs[j->ptx_of].t]->name,
				        b->tg[j->t]->name, b->jobs[j->ptx_of].cols != j->cols
				        ? ", its columns at run time" : "");
			if (j->cubin_of >= 0)
				fprintf(stderr, "  (the PTX of %s: its cubin)", b->jobs[j->cubin_of].name);
			fprintf(stderr, "  [#%d est %d ms, worker %d, %.1f-%.1f ms]", j->rank, j->cost,
			        j->worker, j->t0, j->t1);
			fputc('\n', stderr);
		}
		llvm_cpu += j->llvm_cpu_ms;
		px_cpu += j->ptxas_cpu_ms;
		if (j->ptxas_ms > 0) {
			ptx++;
			px += j->ptxas_ms;
		}
	}
	fprintf(stderr, "time: recipe+model+plan %.1f ms, lower+passes %.1f ms, kernels %.1f ms, "
	                "manifest+C %.1f ms\n", b->ms_front, b->ms_passes, b->ms_compile, b->ms_write);
	if (b->nclass)
		fprintf(stderr, "time: %d layers lowered and passed as %d classes (driver/group.c)\n",
		        b->nlayers, b->nclass);
	fprintf(stderr, "time: %d kernels, %d cache hits, %d LLVM (%.1f ms, %.1f ms/kernel), "
	                "%d ptxas (%.1f ms), %d jobs, total %.1f ms\n",
	        b->njobs, hits, built, llvm, built ? llvm / built : 0.0, ptx, px, b->jobs_n,
	        now_ms() - t0);
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	double cself = tv_ms(self.ru_utime) + tv_ms(self.ru_stime);
	double ckids = tv_ms(kids.ru_utime) + tv_ms(kids.ru_stime);
	fprintf(stderr, "time: cpu: recipe+model+plan %.1f ms, lower+passes %.1f ms, LLVM %.1f ms, "
	                "ptxas %.1f ms, manifest+C %.1f ms; total %.1f ms (precc %.1f + ptxas %.1f) "
	                "in %.1f ms of wall\n", b->cpu_front, b->cpu_passes, llvm_cpu, px_cpu,
	        b->cpu_write, cself + ckids, cself, ckids, now_ms() - t0);
	if (b->ms_compile > 0 && b->jobs_n > 0) {
		int nth = b->jobs_n < built + ptx ? b->jobs_n : built + ptx;
		if (nth < 1)
			nth = 1;
		fprintf(stderr, "time: kernels phase: %.1f ms of LLVM + ptxas CPU in %.1f ms of wall "
		                "on %d threads: %.0f %% busy\n", llvm_cpu + px_cpu, b->ms_compile, nth,
		        100.0 * (llvm_cpu + px_cpu) / (b->ms_compile * nth));
	}
	/* the kernels per target and per shape, and the m_variant copies */
	for (int t = 0; t < b->ntg; t++) {
		int n = 0, nshape[NCGSHAPE] = {0}, var = 0, known = 0;
		for (int k = 0; k < b->njobs; k++) {
			const Job *j = &b->jobs[k];
			if (j->t != t)
				continue;
			n++;
			if ((unsigned)j->e.info.shape < NCGSHAPE)
				nshape[j->e.info.shape]++;
			known += j->f != NULL;  /* NULL: from a whole-build entry */
			var += j->f && j->f->pattr[PA_M_VARIANT] != NULL;
		}
		fprintf(stderr, "time: %s: %d kernels (", b->tg[t]->name, n);
		const char *sep = "";
		for (int s = 0; s < NCGSHAPE; s++)
			if (nshape[s]) {
				fprintf(stderr, "%s%s %d", sep, codegen_shape_name((CgShape)s), nshape[s]);
				sep = ", ";
			}
		if (known)
			fprintf(stderr, "), %d of them with an m_variant (a copy on a larger tile)", var);
		fputs(known ? "\n" : ")\n", stderr);
	}
}

int
cmd_build(int argc, char **argv)
{
	double t0 = now_ms(), c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
	Build b;
	const char *targets = "sm_90a", *jobs = NULL, *stats_m = NULL, *cluster = NULL;
	static const char *const opts[] = {"--model", "--target", "--output", "--emit", "--layer",
	                                   "--no-cache", "--jobs", "--time", "--stats", "--stats-m", "--json",
	                                   "--cluster", "--help"};
	int rc = 0, whole = 0;

	memset(&b, 0, sizeof b);
	b.timing = getenv("PRECC_TIME") && !strcmp(getenv("PRECC_TIME"), "1");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		static const struct { const char *opt; int len; char shortopt; } valued[] = {
			{"--model", 7, 'm'}, {"--target", 8, 0}, {"--output", 8, 'o'}, {"--emit", 6, 0},
			{"--layer", 7, 0}, {"--jobs", 6, 'j'}, {"--stats-m", 9, 0}, {"--cluster", 9, 0}};
		int which = -1;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help(stdout);
			return 0;
		}
		if (!strcmp(a, "--no-cache")) {
			b.no_cache = 1;
			continue;
		}
		if (!strcmp(a, "--time")) {
			b.timing = 1;
			continue;
		}
		if (!strcmp(a, "--json")) {
			b.json = 1;
			continue;
		}
		if (!strcmp(a, "--stats")) {
			b.stats_m = 8192;
			continue;
		}
		for (int k = 0; k < 8; k++) {
			int l = valued[k].len;
			if (!strncmp(a, valued[k].opt, l) && (a[l] == 0 || a[l] == '=')) {
				which = k;
				v = a[l] == '=' ? a + l + 1 : NULL;
			} else if (valued[k].shortopt && a[0] == '-' && a[1] == valued[k].shortopt) {
				which = k;
				v = a[2] ? a + 2 : NULL;
			}
			if (which >= 0)
				break;
		}
		if (which >= 0) {
			if (!v) {
				if (++i == argc)
					return usage_error("build", "%s needs a value", a);
				v = argv[i];
			}
			const char **slot[] = {&b.model_path, &targets, &b.out, &b.emit, &b.layer, &jobs, &stats_m,
			                       &cluster};
			*slot[which] = v;
		} else if (a[0] == '-' && a[1]) {
			const char *s = suggest(a, opts, sizeof opts / sizeof opts[0]);
			if (s)
				return usage_error("build", "unknown option '%s' (did you mean '%s'?)", a, s);
			return usage_error("build", "unknown option '%s'", a);
		} else if (b.recipe_path)
			return usage_error("build", "one recipe at a time ('%s' and '%s')", b.recipe_path, a);
		else
			b.recipe_path = a;
	}
	if (!b.recipe_path)
		return usage_error("build", "missing RECIPE");
	if (!b.model_path || !*b.model_path)
		return usage_error("build", "missing --model MODEL");
	if ((rc = parse_targets(&b, targets)))
		return rc;
	if (b.emit && strcmp(b.emit, "ir") && strcmp(b.emit, "llvm") && strcmp(b.emit, "ptx"))
		return usage_error("build", "unknown --emit stage '%s' (stages: ir, llvm, ptx)", b.emit);
	if (b.layer && !b.emit)
		return usage_error("build", "--layer applies to --emit");
	if (!b.emit && !b.out)
		return usage_error("build", "missing -o DIR");
	b.jobs_n = online_cpus();
	if (jobs) {
		char *end;
		long n = strtol(jobs, &end, 10);
		if (*end || n < 1 || n > 256)
			return usage_error("build", "--jobs wants a number from 1 to 256, not '%s'", jobs);
		b.jobs_n = (int)n;
	}
	if (b.jobs_n < 1)
		b.jobs_n = 1;
	if (cluster) {
		if (!strcmp(cluster, "1x1"))
			b.cluster = GEMM_CLUSTER_1X1;
		else if (!strcmp(cluster, "2x1"))
			b.cluster = GEMM_CLUSTER_2X1;
		else if (!strcmp(cluster, "auto"))
			b.cluster = GEMM_CLUSTER_AUTO;
		else
			return usage_error("build", "--cluster wants 1x1, 2x1 or auto, not '%s'", cluster);
	}
	if (stats_m) {                  /* --stats-m N implies --stats */
		char *end;
		long n = strtol(stats_m, &end, 10);
		if (*end || n < 1 || n > (1L << 30))
			return usage_error("build", "--stats-m wants a number from 1 to 2^30, not '%s'", stats_m);
		b.stats_m = n;
	}
	if (b.stats_m && b.emit)
		return usage_error("build", "--stats applies to a build into -o DIR, not --emit");
	if (b.out && !b.emit && mkdir_p(b.out)) {
		struct stat st;
		if (!stat(b.out, &st) && S_ISDIR(st.st_mode))   /* there, but read-only */
			errorf(b.out, 0, "the output directory is not writable: %s", strerror(errno));
		errorf(b.out, 0, "cannot create the output directory: %s", strerror(errno));
	}
	if (b.out && !b.emit)
		lock_out(b.out);

	Recipe *recipe = recipe_load(b.recipe_path);
	Model *model = model_load(b.model_path);
	Plan *plan = plan_resolve(recipe, model);
	char *rname = recipe->name && *recipe->name ? xstrdup(recipe->name) : stem(b.recipe_path);
	char *mname = model->name && *model->name ? xstrdup(model->name) : stem(b.model_path);
	b.recipe_hash = file_identity(recipe->path ? recipe->path : b.recipe_path);
	b.model_hash = model_identity(model);
	b.training = &recipe->training;
	b.model = model;
	b.nlayers = plan->nlayers;
	double tp = now_ms(), cp = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
	b.ms_front = tp - t0;
	b.cpu_front = cp - c0;
	uint64_t ident = 0, bkey = 0;
	if (!b.emit) {
		char why[4200] = "";
		/* after the recipe and model: their errors exit, leaving no stage */
		publish_begin(&b);
		find_ptxas(b.ptxas, sizeof b.ptxas, &b.ptxas_from, why, sizeof why);
		if (!*b.ptxas)
			fprintf(stderr, "precc build: note: ptxas not found (%s): no cubins are written "
			                "and manifest.json lists PTX only\n", why);
		b.cache = cache_open(b.no_cache);
		ident = compiler_identity(b.ptxas);
		bkey = build_key(&b, ident, rname, mname);
		char err[4400] = "";
		int got = get_build(&b, bkey, err, sizeof err);
		if (got < 0) {
			fprintf(stderr, "%s\n", err);
			rc = 1;
		}
		if (got) {
			whole = got > 0;
			b.ms_front = now_ms() - t0;
			b.cpu_front = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
			if (got > 0 && b.stats_m && print_stats(&b))
				rc = 1;
			goto done;
		}
	}
	tp = now_ms();
	cp = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
	LayerGroups groups;
	b.nclass = group_layers(plan, b.layer, &groups);
	b.nlayers = plan->nlayers;
	for (int t = 0; t < (b.emit ? 1 : b.ntg); t++) {
		char err[4096];
		Module *m = group_lower(plan, b.layer, &groups);
		b.mods[t] = m;
		/* the expert groups' funcs, after every layer's (group_expand
		 * leaves them and their first-used kernels at the end) */
		grouped_lower(&b, plan, m, t == 0);
		if (m->nfn == 0) {
			fprintf(stderr, "precc: error: no layer of '%s' matches '%s'\n", b.model_path,
			        b.layer ? b.layer : "");
			rc = 1;
			group_free(&groups);
			goto done;
		}
		if (ir_verify(m, err, sizeof err)) {
			fprintf(stderr, "precc: %s\n", err);
			rc = 1;
			group_free(&groups);
			goto done;
		}
		PassOptions po = {.target = b.tg[t], .cluster = b.cluster};
		passes_run(m, &po);
		group_expand(m, plan, &groups, &b.origin[t]);
	}
	group_free(&groups);
	b.ms_passes = now_ms() - tp;
	b.cpu_passes = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cp;
	if (b.emit) {
		rc = emit(&b);
		goto done;
	}

	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.ptxas_done, NULL);
	b.share_ptx = !(getenv("PRECC_SHARE_PTX") && !strcmp(getenv("PRECC_SHARE_PTX"), "0"));
	collect_jobs(&b, ident);
	tp = now_ms();
	rc = compile_all(&b) ? 1 : 0;
	pthread_cond_destroy(&b.ptxas_done);
	pthread_mutex_destroy(&b.mu);
	b.ms_compile = now_ms() - tp;
	if (!rc) {
		char err[4400] = "", *text[3];
		tp = now_ms();
		cp = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
		text[0] = artifacts_manifest(&b, rname, mname);
		if (b.stats_m) {
			char *st = stats_manifest(text[0], b.stage, b.stats_m, stderr);
			if (!st)
				rc = 1;
			else {
				free(text[0]);
				text[0] = st;
			}
		}
		artifacts_c(&b, rname, mname, &text[1], &text[2]);
		for (int i = 0; i < 3 && !rc; i++)
			if (write_file(b.stage, b.out, gen_files[i], text[i], strlen(text[i]), err, sizeof err)) {
				fprintf(stderr, "%s\n", err);
				rc = 1;
			}
		if (!rc) {
			put_build(&b, bkey, text);
			remove_stale(&b);
		}
		for (int i = 0; i < 3; i++)
			free(text[i]);
		b.ms_write = now_ms() - tp;
		b.cpu_write = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cp;
	}
done:
	if (b.out && !b.emit) {
		char err[4400] = "";
		if (rc)
			publish_abort(&b);
		else if (publish_commit(&b, err, sizeof err)) {
			fprintf(stderr, "%s\n", err);
			publish_abort(&b);
			rc = 1;
		}
	}
	if (b.timing && !b.emit)
		print_times(&b, t0);
	if (!rc && !b.emit)
		build_summary(&b, whole, now_ms() - t0, rname, mname);
	cache_close(b.cache);
	for (int k = 0; k < b.njobs; k++) {
		cache_entry_free(&b.jobs[k].e);
		free(b.jobs[k].err);
	}
	free(b.jobs);
	free(b.order);
	free(b.kmap);
	for (int t = 0; t < b.ntg; t++) {
		if (b.mods[t])
			ir_module_free(b.mods[t]);
		free(b.origin[t]);
	}
	grouped_free(&b);
	free(rname);
	free(mname);
	plan_free(plan);
	model_free(model);
	recipe_free(recipe);
	return rc;
}
