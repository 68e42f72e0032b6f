/* out_file.c: output format names and choosing one from a path, and
 * writing a profile to a file atomically with the chosen writer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "out.h"

/* ------------------------------------------------------------ formats */

static const struct {
	const char *name;
	const char *noun;
	int (*write)(const struct profile *, FILE *);
} formats[OUT_NFORMATS] = {
	[OUT_FLAMEGRAPH] = { "flamegraph", "flame graph", out_svg_write },
	[OUT_FOLDED] = { "folded", "folded stacks", out_folded_write },
	[OUT_SPEEDSCOPE] = { "speedscope", "speedscope profile", out_speedscope_write },
	[OUT_PPROF] = { "pprof", "pprof profile", out_pprof_write },
	[OUT_CALLGRIND] = { "callgrind", "callgrind profile", out_callgrind_write },
};

int out_format_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < OUT_NFORMATS; i++)
		if (strcmp(name, formats[i].name) == 0)
			return i;
	return -1;
}

static int has_suffix(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);
	return n >= m && strcasecmp(s + n - m, suf) == 0;
}

int out_format_from_path(const char *path)
{
	static const struct {
		const char *suffix;
		int fmt;
	} map[] = {
		{ ".svg", OUT_FLAMEGRAPH },
		{ ".folded", OUT_FOLDED },
		{ ".collapsed", OUT_FOLDED },
		{ ".txt", OUT_FOLDED },
		{ ".json", OUT_SPEEDSCOPE },
		{ ".speedscope", OUT_SPEEDSCOPE },
		{ ".pb.gz", OUT_PPROF },
		{ ".pprof", OUT_PPROF },
		{ ".pb", OUT_PPROF },
		{ ".callgrind", OUT_CALLGRIND },
	};
	size_t n = path ? strlen(path) : 0;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (has_suffix(path, n, map[i].suffix))
			return map[i].fmt;
	const char *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	if (base && !strncmp(base, "callgrind.out", 13))
		return OUT_CALLGRIND;
	const char *dot = base ? strrchr(base, '.') : NULL;
	if (dot && dot != base)
		return -1; /* out.png: not SVG under a wrong name */
	return OUT_FLAMEGRAPH;
}

const char *out_format_name(int fmt)
{
	return fmt >= 0 && fmt < OUT_NFORMATS ? formats[fmt].name : "unknown";
}

const char *out_format_noun(int fmt)
{
	return fmt >= 0 && fmt < OUT_NFORMATS ? formats[fmt].noun : "output";
}

/* ------------------------------------------------------------ writing */

/* Best effort: make the rename itself durable. */
static void sync_parent_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
			  : strdup(".");
	if (!dir)
		return;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

static int write_stream(const struct profile *p, int fmt, FILE *f)
{
	errno = 0;
	int r = formats[fmt].write(p, f);
	if (r == 0 && fflush(f) != 0)
		r = errno > 0 ? -errno : -EIO;
	if (r == 0)
		r = out_ferror(f);
	return r;
}

int out_write_file(const struct profile *p, int fmt, const char *path)
{
	if (fmt < 0 || fmt >= OUT_NFORMATS || !path || !*path)
		return -EINVAL;
	if (strcmp(path, "-") == 0)
		return write_stream(p, fmt, stdout);

	size_t n = strlen(path);
	char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");

	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		free(tmp);
		return r;
	}
	/* mkstemp makes 0600; give the file the mode open(2) would. */
	mode_t mask = umask(0);
	umask(mask);
	int r = 0;
	if (fchmod(fd, 0666 & ~mask) != 0)
		r = -errno;
	FILE *f = r ? NULL : fdopen(fd, "w");
	if (!f) {
		if (!r)
			r = -errno;
		close(fd);
	} else {
		r = write_stream(p, fmt, f);
		if (r == 0 && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
			r = -errno;
		if (fclose(f) != 0 && r == 0)
			r = -errno;
	}
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	else
		sync_parent_dir(path);
	free(tmp);
	return r;
}
