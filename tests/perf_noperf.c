/* tests/perf_noperf.c: run a command with perf_event_open(2) refused,
 * as in a container whose seccomp profile blocks it.
 *   perf_noperf ERRNO COMMAND [ARG...]   (ERRNO: EACCES, EPERM or ENOSYS)
 * Installs a seccomp filter (after PR_SET_NO_NEW_PRIVS) that makes every
 * perf_event_open fail with ERRNO and allows everything else, then
 * execs COMMAND. For perf-sampler-fallback.test. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: perf_noperf EACCES|EPERM|ENOSYS COMMAND [ARG...]\n");
		return 2;
	}
	int e = !strcmp(argv[1], "EPERM") ? EPERM : !strcmp(argv[1], "ENOSYS") ? ENOSYS : EACCES;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)e),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("perf_noperf: seccomp");
		return 99;
	}
	execvp(argv[2], argv + 2);
	perror("perf_noperf: exec");
	return 127;
}
