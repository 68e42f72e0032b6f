/* jitdump_host.c: a Lua 5.4 host with a tiny "JIT" that writes a jitdump
 * file as perf's JIT agents do (tests/jitdump-*.test; the format of the
 * Linux kernel's tools/perf/Documentation/jitdump-specification.txt).
 * It maps anonymous memory, writes a trampoline there (x86_64 machine
 * code: push rbx; mov rax, rdi; mov rdi, rsi; call rax; pop rbx; ret),
 * makes it executable, creates DIR/jit-PID.dump, maps its first page
 * (PROT_READ | PROT_EXEC, MAP_PRIVATE: the marker perf looks for), and
 * writes the header and a JIT_CODE_LOAD naming the trampoline
 * "jitdump_host::bridge" (with its code bytes). Lua calls bridge(f), a C
 * function that calls f through the trampoline:
 *   main chunk -> outer -> bridge (C) -> [trampoline] -> call_back (C)
 *     -> inner (Lua, a busy loop)
 * so the trampoline's frame lies between Lua frames.
 * On SIGUSR1 it appends the first 30 bytes of a second JIT_CODE_LOAD for
 * the same code, named "jitdump_host::bridge_v2"; on SIGUSR2 the rest of
 * it (a record torn, then whole, as a writer racing a reader leaves it).
 *   jitdump_host SECS DIR [late]   prints "PID START SIZE PATH" once ready
 * With SECS <= 0 it runs until killed. With "late" the jitdump file is
 * made (and mapped) only once SIGHUP came, at the next call of bridge():
 * a JIT that starts after the profiler attached. */
#include <elf.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef void (*tramp_fn)(void (*cb)(lua_State *), lua_State *L);
static tramp_fn tramp;
static int dump_fd = -1;
static volatile sig_atomic_t want_dump;
static void *code_mem;
static char dump_path[4096];
static int start_dump(void);
static unsigned char v2[256];
static size_t v2_len;

static const unsigned char code[] = {
	0x53,             /* push rbx (keeps the stack 16-byte aligned) */
	0x48, 0x89, 0xf8, /* mov rax, rdi */
	0x48, 0x89, 0xf7, /* mov rdi, rsi */
	0xff, 0xd0,       /* call rax */
	0x5b,             /* pop rbx */
	0xc3,             /* ret */
};

/* Called from the trampoline: run the Lua function at index 1. */
__attribute__((noinline)) static void call_back(lua_State *L)
{
	lua_pushvalue(L, 1);
	lua_call(L, 0, 0);
}

static int bridge(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	if (want_dump && dump_fd < 0 && start_dump() < 0)
		return luaL_error(L, "cannot write %s", dump_path);
	tramp(call_back, L);
	return 0;
}

static const char script[] =
	"local secs = ...\n"
	"local function inner()\n"
	"  local x = 0\n"
	"  for i = 1, 200000 do x = x + i % 7 end\n"
	"  return x\n"
	"end\n"
	"local function outer()\n"
	"  bridge(inner)\n"
	"end\n"
	"local t0 = os.time()\n"
	"while secs <= 0 or os.time() - t0 < secs do\n"
	"  outer()\n"
	"end\n";

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t put(unsigned char *b, size_t o, const void *p, size_t n)
{
	memcpy(b + o, p, n);
	return o + n;
}

/* A JIT_CODE_LOAD record of the trampoline named NAME into B (room for
 * 256 bytes). Returns its size. */
static size_t load_record(unsigned char *b, void *mem, const char *name, uint64_t index)
{
	uint32_t id = 0, pid = (uint32_t)getpid(), tid = pid;
	uint64_t ts = now_ns(), addr = (uint64_t)(uintptr_t)mem, size = sizeof code;
	uint32_t total = (uint32_t)(16 + 40 + strlen(name) + 1 + sizeof code);
	size_t o = 0;
	o = put(b, o, &id, 4);
	o = put(b, o, &total, 4);
	o = put(b, o, &ts, 8);
	o = put(b, o, &pid, 4);
	o = put(b, o, &tid, 4);
	o = put(b, o, &addr, 8); /* vma */
	o = put(b, o, &addr, 8); /* code_addr */
	o = put(b, o, &size, 8);
	o = put(b, o, &index, 8);
	o = put(b, o, name, strlen(name) + 1);
	o = put(b, o, code, sizeof code);
	return o;
}

static void on_usr(int sig)
{
	if (sig == SIGHUP) {
		want_dump = 1;
		return;
	}
	/* write(2) is async-signal-safe; the record was made beforehand */
	if (sig == SIGUSR1 && write(dump_fd, v2, 30) != 30)
		_exit(3);
	if (sig == SIGUSR2 && write(dump_fd, v2 + 30, v2_len - 30) != (ssize_t)(v2_len - 30))
		_exit(3);
}

/* Make DUMP_PATH as perf's agents do: header, the marker mapping, a load
 * naming the trampoline. 0, or -1 (said on stderr). */
static int start_dump(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = open(dump_path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(dump_path);
		return -1;
	}
	/* the header: magic, version, size, elf_mach, pad1, pid, timestamp, flags */
	unsigned char hdr[40];
	uint32_t magic = 0x4A695444, version = 1, hsize = 40, mach = EM_X86_64, pad = 0,
		 pid = (uint32_t)getpid();
	uint64_t ts = now_ns(), flags = 0;
	size_t o = 0;
	o = put(hdr, o, &magic, 4);
	o = put(hdr, o, &version, 4);
	o = put(hdr, o, &hsize, 4);
	o = put(hdr, o, &mach, 4);
	o = put(hdr, o, &pad, 4);
	o = put(hdr, o, &pid, 4);
	o = put(hdr, o, &ts, 8);
	o = put(hdr, o, &flags, 8);
	if (write(fd, hdr, o) != (ssize_t)o) {
		perror("write");
		return -1;
	}
	/* the marker mapping perf's agents make (PROT_EXEC, so that perf
	 * records it; read-only where the file system forbids it) */
	void *mark = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (mark == MAP_FAILED)
		mark = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE, fd, 0);
	if (mark == MAP_FAILED) {
		perror("mmap jitdump");
		return -1;
	}
	unsigned char rec[256];
	size_t n = load_record(rec, code_mem, "jitdump_host::bridge", 1);
	if (write(fd, rec, n) != (ssize_t)n) {
		perror("write");
		return -1;
	}
	dump_fd = fd;
	return 0;
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 30;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	int late = argc > 3 && !strcmp(argv[3], "late");
	long page = sysconf(_SC_PAGESIZE);
	void *mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(mem, code, sizeof code);
	if (mprotect(mem, (size_t)page, PROT_READ | PROT_EXEC) < 0) {
		perror("mprotect");
		return 1;
	}
	tramp = (tramp_fn)mem;

	snprintf(dump_path, sizeof dump_path, "%s/jit-%d.dump", dir, (int)getpid());
	code_mem = mem;
	if (!late && start_dump() < 0)
		return 1;
	v2_len = load_record(v2, mem, "jitdump_host::bridge_v2", 2);
	signal(SIGUSR1, on_usr);
	signal(SIGUSR2, on_usr);
	signal(SIGHUP, on_usr);

	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "bridge", bridge);
	if (luaL_loadbuffer(L, script, sizeof script - 1, "=jitdump_host.lua")) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	printf("%d %lx %zx %s\n", (int)getpid(), (unsigned long)mem, sizeof code, dump_path);
	fflush(stdout);
	lua_pushinteger(L, secs);
	int rc = 0;
	if (lua_pcall(L, 1, 0, 0)) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		rc = 1;
	}
	lua_close(L);
	return rc;
}
