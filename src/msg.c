/* msg.c: one-line diagnostics. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "msg.h"
#include "proc_task.h"

int msg_verbose;

static void vout(const char *prefix, const char *fmt, va_list ap)
{
	char buf[2048];
	int n = snprintf(buf, sizeof buf, "luaspy: %s", prefix);
	if (n < 0)
		return;
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	size_t len = strlen(buf);
	if (len >= sizeof buf - 1)
		len = sizeof buf - 2;
	buf[len++] = '\n';
	ssize_t w = write(2, buf, len);
	(void)w;
}

void msg_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vout("", fmt, ap);
	va_end(ap);
}

void msg_debug(int level, const char *fmt, ...)
{
	if (msg_verbose < level)
		return;
	va_list ap;
	va_start(ap, fmt);
	vout("[v] ", fmt, ap);
	va_end(ap);
}

/* Whether we hold CAP_SYS_PTRACE (bit 19 of CapEff in /proc/self/status). */
static int have_cap_sys_ptrace(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	char line[256];
	unsigned long long eff = 0;
	int found = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = 1;
			break;
		}
	fclose(f);
	return found && (eff >> 19 & 1);
}

int msg_err_pid(int pid, int e)
{
	if ((e == LS_E_TRACED || e == -LS_E_TRACED) && pid > 0) {
		pid_t tracer = proc_tracer(pid);
		char comm[64] = "?";
		if (tracer > 0 && proc_comm(tracer, comm, sizeof comm) == 0)
			msg_error("process %d is already traced by %d (%s)", pid, (int)tracer, comm);
		else
			msg_error("process %d is already traced", pid);
		return err_exit_code(e);
	}
	const char *hint = err_hint(e);
	char extra[256] = "";
	if ((e == LS_E_PERM || e == -LS_E_PERM) && have_cap_sys_ptrace()) {
		/* root already: the usual advice would send the user in circles */
		hint = "refused even with CAP_SYS_PTRACE (a security module, or a process"
		       " the kernel keeps from every tracer)";
	} else if (e == LS_E_PERM || e == -LS_E_PERM) {
		FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
		int scope = 0;
		if (f) {
			if (fscanf(f, "%d", &scope) != 1)
				scope = 0;
			fclose(f);
		}
		if (scope > 0)
			snprintf(extra, sizeof extra,
				 " (kernel.yama.ptrace_scope is %d; 0 allows attaching to your own processes)",
				 scope);
	}
	if (pid > 0)
		msg_error("pid %d: %s%s%s%s", pid, err_text(e), hint ? "; " : "",
			  hint ? hint : "", extra);
	else
		msg_error("%s%s%s%s", err_text(e), hint ? "; " : "", hint ? hint : "", extra);
	return err_exit_code(e);
}

void msg_cannot_run(const char *cmd, int err)
{
	msg_error("cannot run '%s': %s", cmd, strerror(err));
}

int msg_unsupported(int pid, const char *why)
{
	msg_error("pid %d: unsupported runtime: %s", pid, why);
	return err_exit_code(-LS_E_UNSUPPORTED);
}

void msg_falling_behind(unsigned long long nlate, unsigned long long nticks,
			unsigned long long max_lag_ns)
{
	msg_error("fell behind: %llu of %llu ticks late (up to %.1f ms lag); lower the rate with -r",
		  nlate, nticks, (double)max_lag_ns / 1e6);
}

void msg_waiting_for_lua(int pid, double timeout_s)
{
	msg_error("pid %d: no Lua runtime yet; waiting up to %g s for one (--timeout)", pid, timeout_s);
}

int msg_self(int pid)
{
	msg_error("pid %d is luaspy itself", pid);
	return err_exit_code(LS_E_USAGE);
}
