/*
 * publish.c — a build's -o as a unit (docs/artifacts.md, "How a build is
 * published"). The build writes into a staging directory beside -o,
 * .BASE.precc-stage.XXXXXX in -o's parent (so on its filesystem), and
 * publish_commit swaps the two with one renameat2(RENAME_EXCHANGE): a
 * reader of -o sees the old build or the new one, whole, never a mix,
 * and -o keeps its path. Entries of -o that are not a build's (a user's
 * notes, the python wrapper's precc_model.lua) are hard-linked into the
 * stage first and moved after the swap. What a killed build leaves beside
 * -o is swept by the next build into it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "build.h"
#include "recipe.h"

#define STAGE_TAG ".precc-stage."

static const char *const own_files[] = {"manifest.json", "precc_kernels.h", "precc_kernels.c"};

/* k_<16 hex>.<anything>: a kernel's name and the dot after it */
static int
kernel_stem(const char *n)
{
	if (strncmp(n, "k_", 2) || strlen(n) < 20 || n[18] != '.')
		return 0;
	for (int i = 2; i < 18; i++)
		if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
			return 0;
	return 1;
}

/* A kernel file a build writes: k_<16 hex>.<sm>.ptx or .cubin. */
int
publish_kernel_file(const char *n)
{
	size_t l = strlen(n);

	return kernel_stem(n) && ((l > 4 && !strcmp(n + l - 4, ".ptx"))
	                          || (l > 6 && !strcmp(n + l - 6, ".cubin")));
}

/* A name a build writes into -o: its files, the lock, and the hidden
 * temporaries of both (".NAME.XXXXXX", ptxas's ".cubin" beside them, the
 * ".cubin.log" of older precc). Everything else in -o is the user's. */
int
publish_ours(const char *n)
{
	if (!strcmp(n, ".precc.lock"))
		return 1;
	for (int i = 0; i < 3; i++)
		if (!strcmp(n, own_files[i]))
			return 1;
	if (kernel_stem(n))
		return publish_kernel_file(n);
	if (n[0] != '.')
		return 0;
	for (int i = 0; i < 3; i++) {
		size_t k = strlen(own_files[i]);
		if (!strncmp(n + 1, own_files[i], k) && n[1 + k] == '.')
			return 1;
	}
	return kernel_stem(n + 1) && (strstr(n, ".ptx.") || strstr(n, ".cubin."));
}

/* PRECC_TEST_KILL_AT=POINT: SIGKILL here, as an OOM kill or a power cut
 * would (tests/lit/build/publish.test). */
void
publish_kill_at(const char *point)
{
	const char *at = getenv("PRECC_TEST_KILL_AT");

	if (at && !strcmp(at, point))
		raise(SIGKILL);
}

static void
sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* Empties the directory old (a stage, or the generation -o replaced) and
 * removes it. A build's files go. Another entry is the user's: a hard link
 * of the same file in -o goes, one -o lacks moves into -o, one -o has in
 * another version stays, and so does old, with a warning naming it —
 * nothing of the user's is ever deleted. */
static void
retire(const char *old, const char *out)
{
	int fd = open(old, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int ofd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int kept = 0;

	if (!d || ofd < 0) {
		if (fd >= 0)
			close(fd);
		if (ofd >= 0)
			close(ofd);
		return;
	}
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		struct stat a, b;
		if (!strcmp(n, ".") || !strcmp(n, "..") || fstatat(fd, n, &a, AT_SYMLINK_NOFOLLOW))
			continue;
		if (publish_ours(n) && !S_ISDIR(a.st_mode))
			kept += unlinkat(fd, n, 0) != 0;
		else if (!fstatat(ofd, n, &b, AT_SYMLINK_NOFOLLOW))
			kept += a.st_ino != b.st_ino || a.st_dev != b.st_dev || unlinkat(fd, n, 0);
		else
			kept += renameat(fd, n, ofd, n) != 0;
	}
	closedir(d);
	close(ofd);
	if (kept || rmdir(old))
		warnf(old, 0, "left beside %s: %d entr%s that %s does not have in the same version "
		      "(a file changed during the build?)", out, kept, kept == 1 ? "y" : "ies", out);
}

/* Stale stages of builds killed before or after their swap, and hidden
 * temporaries in -o of builds that wrote in place (older precc). */
static void
sweep(Build *b, const char *parent, const char *base)
{
	char pre[512], path[8400];
	DIR *d = opendir(parent);
	struct dirent *e;

	snprintf(pre, sizeof pre, ".%s" STAGE_TAG, base);
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre)) && strlen(e->d_name) == strlen(pre) + 6) {
			snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
			retire(path, b->outdir);
		}
	if (d)
		closedir(d);
	if (!(d = opendir(b->outdir)))
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] == '.' && publish_ours(e->d_name) && strcmp(e->d_name, ".precc.lock")) {
			snprintf(path, sizeof path, "%s/%s", b->outdir, e->d_name);
			unlink(path);
		}
	closedir(d);
}

/* After lock_out: sweep, then make the stage (b->stage) with -o's lock
 * and the user's files linked in. In place (b->stage is -o) when -o is a
 * mount point or its parent takes no new directory; a note says so. */
void
publish_begin(Build *b)
{
	char real[4096], pbuf[4096], bbuf[4096];
	struct stat so, sp;

	snprintf(b->stage, sizeof b->stage, "%s", b->out);
	snprintf(b->outdir, sizeof b->outdir, "%s", b->out);
	b->inplace = 1;
	if (!realpath(b->out, real))
		return;
	snprintf(b->outdir, sizeof b->outdir, "%s", real);
	snprintf(pbuf, sizeof pbuf, "%s", real);
	snprintf(bbuf, sizeof bbuf, "%s", real);
	const char *parent = dirname(pbuf), *base = basename(bbuf);
	if (!strcmp(real, "/") || stat(parent, &sp) || stat(real, &so)) {
		sweep(b, real, "");
		return;
	}
	sweep(b, parent, base);
	if (so.st_dev != sp.st_dev) {
		fprintf(stderr, "precc build: note: %s is a mount point: writing into it in place, "
		        "not as a unit (docs/artifacts.md)\n", b->out);
		return;
	}
	snprintf(b->stage, sizeof b->stage, "%s/.%s" STAGE_TAG "XXXXXX", parent, base);
	if (!mkdtemp(b->stage)) {
		/* a parent we may not write: in place; a full disk (ENOSPC, EDQUOT)
		 * or worse fails the build before it touches -o */
		if (errno != EACCES && errno != EPERM && errno != EROFS)
			errorf(b->out, 0, "cannot stage the build beside it: %s", strerror(errno));
		fprintf(stderr, "precc build: note: cannot stage beside %s (%s): writing into it in "
		        "place, not as a unit (docs/artifacts.md)\n", b->out, strerror(errno));
		snprintf(b->stage, sizeof b->stage, "%s", b->out);
		return;
	}
	chmod(b->stage, so.st_mode & 07777);
	b->inplace = 0;
	int ofd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int sfd = open(b->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = ofd >= 0 ? fdopendir(ofd) : NULL;
	struct dirent *e;
	while (d && sfd >= 0 && (e = readdir(d))) {
		const char *n = e->d_name;
		struct stat st;
		if ((publish_ours(n) && strcmp(n, ".precc.lock")) || !strcmp(n, ".") || !strcmp(n, "..")
		    || fstatat(ofd, n, &st, AT_SYMLINK_NOFOLLOW) || S_ISDIR(st.st_mode))
			continue;       /* directories move after the swap */
		linkat(ofd, n, sfd, n, 0);
	}
	if (d)
		closedir(d);
	else if (ofd >= 0)
		close(ofd);
	if (sfd >= 0)
		close(sfd);
	publish_kill_at("staged");
}

/* Whether the file n is the same bytes in the directories a and b. */
static int
same_file(int a, int b, const char *n)
{
	int fa = openat(a, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int fb = openat(b, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sa, sb;
	int same = fa >= 0 && fb >= 0 && !fstat(fa, &sa) && !fstat(fb, &sb)
	           && S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode) && sa.st_size == sb.st_size;
	char x[16384], y[16384];
	ssize_t k;

	while (same && (k = read(fa, x, sizeof x)) > 0)
		same = read(fb, y, (size_t)k) == k && !memcmp(x, y, (size_t)k);
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return same && k == 0;
}

/* Whether -o already holds exactly the build the stage holds: the same
 * build files, byte for byte, and none more. A warm rebuild into the same
 * -o then publishes nothing, and pays no syncfs (0.5 s on a busy disk,
 * where the rest of a warm 70B-class build is 0.05 s). */
static int
already_published(const char *stage, const char *out)
{
	int sfd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ofd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int same = sfd >= 0 && ofd >= 0, ns = 0, no = 0;

	for (int pass = 0; same && pass < 2; pass++) {
		DIR *d = opendir(pass ? out : stage);
		struct dirent *e;
		while (same && d && (e = readdir(d))) {
			const char *n = e->d_name;
			if (n[0] == '.' || !publish_ours(n))
				continue;   /* the lock, temporaries, the user's files */
			if (pass)
				no++;
			else
				ns++, same = same_file(sfd, ofd, n);
		}
		if (d)
			closedir(d);
		else
			same = 0;
	}
	if (sfd >= 0)
		close(sfd);
	if (ofd >= 0)
		close(ofd);
	return same && ns == no;
}

/* Swaps the stage in for -o: 0, or -1 and err (-o then is the old build,
 * whole). */
int
publish_commit(Build *b, char *err, size_t errsz)
{
	char old[4300], pbuf[4096];

	if (b->inplace)
		return 0;
	if (already_published(b->stage, b->outdir)) {
		retire(b->stage, b->outdir);
		return 0;
	}
	/* one syncfs for the whole stage: its files on disk before the swap
	 * names them, and a late write error (ENOSPC, EIO at writeback) fails
	 * the build instead of publishing it */
	int fd = open(b->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd)) {
		snprintf(err, errsz, "%s: error: cannot write the build: %s", b->out, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	publish_kill_at("written");
	snprintf(old, sizeof old, "%s", b->stage);
	if (renameat2(AT_FDCWD, b->stage, AT_FDCWD, b->outdir, RENAME_EXCHANGE)) {
		if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
			snprintf(err, errsz, "%s: error: cannot publish the build: %s", b->out,
			         strerror(errno));
			return -1;
		}
		/* no RENAME_EXCHANGE on this filesystem: two renames, and -o is
		 * missing (not mixed) between them */
		snprintf(pbuf, sizeof pbuf, "%s", b->outdir);
		snprintf(old, sizeof old, "%s/.%s" STAGE_TAG "XXXXXX", dirname(pbuf),
		         basename(b->outdir));
		if (!mkdtemp(old) || rename(b->outdir, old)) {
			snprintf(err, errsz, "%s: error: cannot publish the build: %s", b->out,
			         strerror(errno));
			return -1;
		}
		if (rename(b->stage, b->outdir)) {
			snprintf(err, errsz, "%s: error: cannot publish the build: %s", b->out,
			         strerror(errno));
			rename(old, b->outdir);
			return -1;
		}
	}
	snprintf(pbuf, sizeof pbuf, "%s", b->outdir);
	sync_dir(dirname(pbuf));
	publish_kill_at("exchanged");
	retire(old, b->outdir);
	return 0;
}

/* A failed build: the stage goes, -o stays the old build. */
void
publish_abort(Build *b)
{
	if (!b->inplace)
		retire(b->stage, b->outdir);
}
