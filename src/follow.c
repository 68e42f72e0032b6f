/* follow.c: the processes of a session (see follow.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "err.h"
#include "fiber_tarantool.h"
#include "follow.h"
#include "intern.h"
#include "msg.h"
#include "pgrep.h"
#include "proc_maps.h"
#include "proc_task.h"
#include "timeutil.h"
#include "vm.h"

#define CHILD_SCAN_NS (10 * 1000000ull)
#define CHILD_SCAN_MAX_NS (200 * 1000000ull)
#define FIRST_REPROBE_NS (20 * 1000000ull)

/* CPU time of this thread, ns. */
static uint64_t cpu_now_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long until the next scan that took the CPU time since CPU0: FACTOR
 * times it (a scan costs at most 1/FACTOR of a CPU), within [LO, HI] ns.
 * The one back-off rule of the child and --pgrep scans. */
static uint64_t scan_wait_ns(uint64_t cpu0, uint64_t factor, uint64_t lo, uint64_t hi)
{
	uint64_t wait = factor * (cpu_now_ns() - cpu0);
	return wait < lo ? lo : wait > hi ? hi : wait;
}

/* PID's parent and start time (stat fields 4 and 22). 0 or -1. */
static int stat_ppid_start(pid_t pid, pid_t *ppid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = memrchr(buf, ')', (size_t)n); /* comm may hold ')' and spaces */
	if (!p)
		return -1;
	int pp;
	unsigned long long st;
	if (sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &pp, &st) != 2)
		return -1;
	*ppid = pp;
	*start = st;
	return 0;
}

/* The device and inode of the program PID runs, 0 when unknown. */
static uint64_t exe_id(pid_t pid)
{
	char path[64];
	struct stat sb;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	if (stat(path, &sb) < 0)
		return 0;
	return ((uint64_t)sb.st_dev << 40) ^ (uint64_t)sb.st_ino;
}

/* A digest of the files PID maps, 0 when unknown. Whether a process is
 * Lua is decided by its modules (the VM's code, lua_ident): while they
 * stay the same a new probe would say the same. */
static uint64_t modules_digest(pid_t pid)
{
	struct proc_maps m = { 0 };
	if (proc_maps_read(pid, &m) < 0)
		return 0;
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < m.n; i++)
		if (proc_map_is_file(&m.m[i]))
			h = (h ^ m.m[i].start ^ (m.m[i].inode << 17)) * 0x100000001b3ull;
	proc_maps_free(&m);
	return h ? h : 1;
}

void follow_init(struct follow *f)
{
	f->self = getpid();
	pid_t p = getppid();
	while (p > 1 && f->nanc < (int)(sizeof f->anc / sizeof f->anc[0])) {
		f->anc[f->nanc++] = p;
		unsigned long long st;
		if (stat_ppid_start(p, &p, &st) < 0)
			break;
	}
}

static int is_ancestor(const struct follow *f, pid_t pid)
{
	for (int i = 0; i < f->nanc; i++)
		if (f->anc[i] == pid)
			return 1;
	return 0;
}

static const char *root_label(pid_t pid)
{
	char cmd[256];
	if (proc_cmdline(pid, cmd, sizeof cmd) < 0)
		cmd[0] = 0;
	for (char *c = cmd; *c; c++)
		if (*c == '"')
			*c = '\'';
	return internf("process %d \"%s\"", (int)pid, cmd);
}

int follow_probe(struct follow *f, struct tgt *tg, char *why, size_t whylen)
{
	struct target *t;
	int vmrc;
	tg->exe_id = exe_id(tg->pid);
	uint64_t modules = modules_digest(tg->pid);
	tg->modules = 0;
	uint64_t t0 = time_now_ns();
	int rc = target_open(tg->pid, VM_PROBE | VM_PROBE_QUICK, &t, &vmrc, why, whylen);
	msg_debug(2, "pid %d: probed in %.1f ms: %s", (int)tg->pid, (double)(time_now_ns() - t0) / 1e6,
		  rc < 0 ? err_text(-rc) : vmrc < 0 ? err_text(-vmrc) : "Lua");
	if (rc < 0)
		return rc;
	if (vmrc < 0) {
		target_close(t);
		if (vmrc == -LS_E_NOTLUA) /* no Lua module: the answer until that changes */
			tg->modules = modules;
		return vmrc;
	}
	/* a young process maps libraries while we probe: read its maps again */
	target_refresh(t);
	tg->t = t;
	tg->root_label = root_label(tg->pid);
	if (tg == &f->tg[0])
		snprintf(f->root_cmd, sizeof f->root_cmd, "%s", t->cmdline);
	if (!f->runtime && t->vm_ops->describe)
		f->runtime = intern(t->vm_ops->describe(t->vm));
	msg_debug(1, "pid %d: profiling %s", (int)tg->pid, f->runtime ? f->runtime : "Lua");
	return 0;
}

static struct tgt *find(struct follow *f, pid_t pid)
{
	for (int i = 0; i < f->n; i++)
		if (f->tg[i].pid == pid)
			return &f->tg[i];
	return NULL;
}

struct tgt *follow_add(struct follow *f, pid_t pid)
{
	if (pid == f->self)
		return NULL;
	struct tgt *tg = find(f, pid);
	if (tg)
		return tg;
	if (f->n == f->cap) {
		int cap = f->cap ? 2 * f->cap : 16;
		struct tgt *a = realloc(f->tg, (size_t)cap * sizeof *a);
		if (!a)
			return NULL;
		f->tg = a;
		f->cap = cap;
	}
	tg = &f->tg[f->n++];
	memset(tg, 0, sizeof *tg);
	tg->pid = pid;
	pid_t pp;
	if (stat_ppid_start(pid, &pp, &tg->start) < 0)
		tg->start = 0;
	tg->probe_wait_ns = FIRST_REPROBE_NS;
	if (is_ancestor(f, pid)) {
		tg->ancestor = 1;
		msg_debug(1, "pid %d is an ancestor of luaspy: it cannot exit before luaspy does; "
			  "the session does not wait for it", (int)pid);
	}
	f->added++;
	return tg;
}

int follow_add_roots(struct follow *f, const pid_t *pids, int n, int roots_only)
{
	f->roots_only = roots_only;
	for (int i = 0; i < n; i++) {
		struct tgt *tg = follow_add(f, pids[i]);
		if (!tg && pids[i] != f->self)
			return -LS_E_NOMEM;
		if (tg) {
			tg->next_probe_ns = 0;
			tg->matched = 1;
		}
	}
	return 0;
}

int follow_watch(struct follow *f, const char *pattern, int full, int roots_only)
{
	if (regcomp(&f->watch_re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
		return -LS_E_USAGE;
	f->watch_pids = malloc(PGREP_MAX * sizeof *f->watch_pids);
	if (!f->watch_pids) {
		regfree(&f->watch_re);
		return -LS_E_NOMEM;
	}
	f->watching = 1;
	f->roots_only = roots_only;
	f->watch_full = full;
	f->watch_pat = pattern;
	for (int i = 0; i < f->n; i++)
		f->tg[i].matched = 1;
	f->next_watch_ns = time_now_ns() + FOLLOW_WATCH_NS;
	msg_debug(1, "--pgrep '%s': looking for new matches every %.1f s", pattern,
		  (double)FOLLOW_WATCH_NS / 1e9);
	return 0;
}

static int was_gone(const struct follow *f, pid_t pid);

/* follow_watch's listing, when its time has come: add the processes
 * that match now and are not followed yet. */
static void watch_scan(struct follow *f, uint64_t now)
{
	if (!f->watching || now < f->next_watch_ns)
		return;
	uint64_t cpu0 = cpu_now_ns();
	int n = pgrep_match(&f->watch_re, f->watch_full, f->watch_pids, PGREP_MAX);
	f->watch_scans++;
	if (n > PGREP_MAX)
		n = PGREP_MAX; /* the rest: at the next listing, when some have gone */
	int live = 0, left = 0;
	for (int i = 0; i < f->n; i++)
		live += f->tg[i].matched && !f->tg[i].dead;
	for (int i = 0; i < n; i++) {
		pid_t pid = f->watch_pids[i];
		if (find(f, pid) || was_gone(f, pid))
			continue;
		if (live >= PGREP_MAX) {
			if (!left++ && !f->watch_over)
				msg_error("--pgrep '%s': %d matching processes are followed already (the most): "
					  "pid %d and later matches are not", f->watch_pat, PGREP_MAX, (int)pid);
			continue;
		}
		struct tgt *tg = follow_add(f, pid);
		if (!tg)
			break; /* out of memory: at the next listing */
		tg->matched = 1;
		tg->next_probe_ns = now;
		live++;
		f->watch_added++;
		char cmd[200];
		if (proc_cmdline(pid, cmd, sizeof cmd) < 0)
			cmd[0] = 0;
		msg_debug(1, "--pgrep '%s': pid %d \"%s\" matches now: following it", f->watch_pat,
			  (int)pid, cmd);
	}
	if ((unsigned long long)left > f->watch_over)
		f->watch_over = (unsigned long long)left;
	/* listing /proc reads two files a process: at most 2% of a CPU */
	f->next_watch_ns = now + scan_wait_ns(cpu0, 50, FOLLOW_WATCH_NS, FOLLOW_WATCH_MAX_NS);
}

static void close_tgt(struct tgt *tg)
{
	target_close(tg->t);
	tg->t = NULL;
	threads_drop(&tg->threads);
	fiber_names_free(tg->fibers);
	tg->fibers = NULL;
}

void follow_reap(struct follow *f)
{
	int j = 1;
	for (int i = 1; i < f->n; i++) {
		struct tgt *tg = &f->tg[i];
		if (!tg->dead) {
			if (i != j)
				f->tg[j] = *tg;
			j++;
			continue;
		}
		if (tg->matched || tg->t)
			msg_debug(1, "pid %d exited: dropped", (int)tg->pid);
		close_tgt(tg);
		f->gone[f->ngone % FOLLOW_GONE].pid = tg->pid;
		f->gone[f->ngone % FOLLOW_GONE].start = tg->start;
		f->ngone++;
		f->freed++;
	}
	if (f->n > 0 && f->tg[0].dead && f->tg[0].t) {
		if (f->watching)
			msg_debug(1, "pid %d exited: dropped", (int)f->tg[0].pid);
		close_tgt(&f->tg[0]); /* the entry stays: session_pid, the end rule */
	}
	f->n = f->n > 0 ? j : 0;
}

/* Was PID, started at START, followed and freed already (a zombie its
 * parent has not reaped yet is still listed as a child)? */
static int was_gone(const struct follow *f, pid_t pid)
{
	int n = f->ngone < FOLLOW_GONE ? f->ngone : FOLLOW_GONE;
	int any = 0;
	for (int i = 0; i < n; i++)
		if (f->gone[i].pid == pid)
			any = 1;
	if (!any)
		return 0;
	pid_t pp;
	unsigned long long st;
	if (stat_ppid_start(pid, &pp, &st) < 0)
		return 1; /* gone for good */
	for (int i = 0; i < n; i++)
		if (f->gone[i].pid == pid && f->gone[i].start == st)
			return 1;
	return 0;
}

static void add_children(struct follow *f, uint64_t now)
{
	int nlive = f->n;
	for (int i = 0; i < nlive; i++) {
		if (f->tg[i].dead)
			continue;
		int n = proc_children(f->tg[i].pid, &f->kids, &f->capkids);
		if (n < 0 && !f->kids_oom++)
			msg_error("out of memory listing the children of pid %d: some are not followed",
				  (int)f->tg[i].pid);
		pid_t *kids = f->kids;
		for (int k = 0; k < n; k++) {
			if (kids[k] == f->self || find(f, kids[k]) || was_gone(f, kids[k]))
				continue;
			struct tgt *t = follow_add(f, kids[k]);
			if (t)
				t->next_probe_ns = now;
		}
	}
}

int follow_scan(struct follow *f)
{
	uint64_t now = time_now_ns();
	if (now < f->next_scan_ns)
		return 0;
	follow_reap(f);
	watch_scan(f, now);
	uint64_t cpu0 = cpu_now_ns();
	if (!f->roots_only)
		add_children(f, now);
	/* listing children reads a file per thread: a process of many
	 * threads is scanned less often, so that the scan takes at most
	 * 10% of a CPU (CPU time: being preempted on a loaded machine is
	 * no reason to scan less), and at least every CHILD_SCAN_MAX_NS */
	f->next_scan_ns = now + scan_wait_ns(cpu0, 10, CHILD_SCAN_NS, CHILD_SCAN_MAX_NS);
	int probes = 0;
	for (int i = 0; i < f->n; i++) {
		struct tgt *tg = &f->tg[i];
		if (tg->dead || tg->t)
			continue;
		if (now < tg->next_probe_ns) {
			uint64_t id = exe_id(tg->pid);
			if (!id || id == tg->exe_id)
				continue;
			tg->probe_wait_ns = FIRST_REPROBE_NS; /* it exec'ed: probe now */
		} else if (tg->modules && modules_digest(tg->pid) == tg->modules) {
			/* the same modules: the same answer (sleep, sh) */
			tg->next_probe_ns = now + tg->probe_wait_ns;
			if (tg->probe_wait_ns < FOLLOW_REPROBE_NS)
				tg->probe_wait_ns *= 2;
			continue;
		}
		char why[256];
		int rc = follow_probe(f, tg, why, sizeof why);
		probes++;
		f->probes++;
		if (rc == -LS_E_NOPID || rc == -LS_E_GONE || rc == -LS_E_ZOMBIE) {
			tg->dead = 1;
		} else if (rc < 0) {
			tg->next_probe_ns = time_now_ns() + tg->probe_wait_ns;
			tg->probe_wait_ns *= 2;
			if (tg->probe_wait_ns > FOLLOW_REPROBE_NS)
				tg->probe_wait_ns = FOLLOW_REPROBE_NS;
		}
	}
	return probes;
}

void follow_close(struct follow *f)
{
	follow_reap(f); /* says the exits not said yet (-v) */
	for (int i = 0; i < f->n; i++)
		close_tgt(&f->tg[i]);
	free(f->tg);
	f->tg = NULL;
	f->n = f->cap = 0;
	free(f->kids);
	f->kids = NULL;
	f->capkids = 0;
	if (f->watching)
		regfree(&f->watch_re);
	f->watching = 0;
	free(f->watch_pids);
	f->watch_pids = NULL;
}
