/*
 * base.c — floor 0: the thread-local last error, rt_read_file (the one
 * way the runtime reads a file: manifest, kernel image, state file), and
 * the backends' names, which every floor's messages use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

static _Thread_local char last_error[RT_ERR_MAX];

const char *precc_rt_last_error(void) { return last_error; }

void rt_error(const char *fmt, ...)
{
	char buf[RT_ERR_MAX];   /* fmt's arguments may point into last_error */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	memcpy(last_error, buf, sizeof buf);
}

char *rt_read_file(const char *path, long max, size_t *len, char *why, size_t whysz)
{
	struct stat sb;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, whysz, "%s", errno == ELOOP ? "it is a symbolic link "
		         "(refused)" : strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(why, whysz, "not a regular file");
		close(fd);
		return NULL;
	}
	if (sb.st_size > max) {
		snprintf(why, whysz, "%lld bytes is more than the %ld a file may have",
		         (long long)sb.st_size, max);
		close(fd);
		return NULL;
	}
	if (!(buf = malloc((size_t)sb.st_size + 1))) {
		snprintf(why, whysz, "out of memory");
		close(fd);
		return NULL;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			snprintf(why, whysz, "%s", k < 0 ? strerror(errno) : "the file shrank");
			free(buf);
			close(fd);
			return NULL;
		}
		got += (size_t)k;
	}
	close(fd);
	buf[got] = 0;
	*len = got;
	return buf;
}

static const char *const backend_names[] = {
	[PRECC_BACKEND_AUTO] = "auto",
	[PRECC_BACKEND_CUDA] = "cuda",
	[PRECC_BACKEND_CPU] = "cpu",
};

const char *precc_backend_name(precc_backend kind)
{
	if ((unsigned)kind < sizeof backend_names / sizeof *backend_names)
		return backend_names[kind];
	return "?";
}

int precc_backend_parse(const char *name, precc_backend *kind)
{
	for (unsigned i = 0; i < sizeof backend_names / sizeof *backend_names; i++)
		if (name && strcmp(name, backend_names[i]) == 0) {
			*kind = (precc_backend)i;
			return 0;
		}
	rt_error("unknown backend '%s' (choose auto, cuda or cpu)",
	         name ? name : "(null)");
	return -1;
}
