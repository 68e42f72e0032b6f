/* follow.c: the processes of a session (see follow.h). */
#include <string.h>
#include "err.h"
#include "follow.h"
#include "intern.h"
#include "msg.h"
#include "proc_task.h"
#include "timeutil.h"
#include "vm.h"

#define CHILD_SCAN_NS (200 * 1000000ull)

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
	int rc = target_open(tg->pid, VM_PROBE | VM_PROBE_QUICK, &t, &vmrc, why, whylen);
	if (rc < 0)
		return rc;
	if (vmrc < 0) {
		target_close(t);
		return vmrc;
	}
	/* a young process maps libraries while we probe: read its maps again */
	target_refresh(t);
	tg->t = t;
	tg->root_label = root_label(tg->pid);
	if (!f->runtime && t->vm_ops->describe)
		f->runtime = intern(t->vm_ops->describe(t->vm));
	msg_debug(1, "pid %d: profiling %s", (int)tg->pid, f->runtime ? f->runtime : "Lua");
	return 0;
}

struct tgt *follow_add(struct follow *f, pid_t pid)
{
	for (int i = 0; i < f->n; i++)
		if (f->tg[i].pid == pid)
			return &f->tg[i];
	if (f->n == FOLLOW_MAX)
		return NULL;
	struct tgt *tg = &f->tg[f->n++];
	memset(tg, 0, sizeof *tg);
	tg->pid = pid;
	return tg;
}

void follow_scan(struct follow *f)
{
	uint64_t now = time_now_ns();
	if (now < f->next_scan_ns)
		return;
	f->next_scan_ns = now + CHILD_SCAN_NS;
	for (int i = 0; i < f->n; i++) {
		if (f->tg[i].dead)
			continue;
		pid_t kids[256];
		int n = proc_children(f->tg[i].pid, kids, 256);
		for (int k = 0; k < n; k++) {
			int known = 0;
			for (int j = 0; j < f->n; j++)
				if (f->tg[j].pid == kids[k])
					known = 1;
			if (!known) {
				struct tgt *t = follow_add(f, kids[k]);
				if (t)
					t->next_probe_ns = now;
			}
		}
	}
	for (int i = 0; i < f->n; i++) {
		struct tgt *tg = &f->tg[i];
		if (tg->dead || tg->t || now < tg->next_probe_ns)
			continue;
		char why[256];
		int rc = follow_probe(f, tg, why, sizeof why);
		if (rc == -LS_E_NOPID || rc == -LS_E_GONE || rc == -LS_E_ZOMBIE)
			tg->dead = 1;
		else if (rc < 0)
			tg->next_probe_ns = now + FOLLOW_REPROBE_NS;
	}
}

void follow_close(struct follow *f)
{
	for (int i = 0; i < f->n; i++) {
		target_close(f->tg[i].t);
		f->tg[i].t = NULL;
		threads_drop(&f->tg[i].threads);
	}
}
