/* tests/t_unwind.c: unwind_after_call, the check that a stack word taken
 * as a restart point follows a call instruction. On the return
 * addresses of real calls this program makes (direct, through a
 * register, through memory), then on the encodings of every ff /2 form
 * and on words that are no call. */
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "unwind.h"

static const uint8_t *ra_seen;

__attribute__((noinline)) static void probe(void)
{
	ra_seen = __builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

void (*volatile probe_ptr)(void) = probe;
void (*volatile probe_table[2])(void) = { probe, probe };

/* Does CODE (LEN bytes) end just before a call? */
static int ends_in_call(const uint8_t *code, size_t len)
{
	uint8_t b[8] = { 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	memcpy(b + 8 - len, code, len);
	return unwind_after_call(b);
}

int main(int argc, char **argv)
{
	(void)argv;
	probe();
	CHECK(unwind_after_call(ra_seen - 8), "direct call");
	probe_ptr();
	CHECK(unwind_after_call(ra_seen - 8), "call through a pointer");
	probe_table[argc & 1]();
	CHECK(unwind_after_call(ra_seen - 8), "call through a table");

	static const struct { uint8_t code[8]; size_t len; int call; const char *what; } cases[] = {
		{ { 0xe8, 1, 2, 3, 4 }, 5, 1, "call rel32" },
		{ { 0xff, 0xd0 }, 2, 1, "call *%rax" },
		{ { 0x41, 0xff, 0xd3 }, 3, 1, "call *%r11" },
		{ { 0xff, 0x10 }, 2, 1, "call *(%rax)" },
		{ { 0xff, 0x14, 0x24 }, 3, 1, "call *(%rsp)" },
		{ { 0xff, 0x15, 1, 2, 3, 4 }, 6, 1, "call *disp32(%rip)" },
		{ { 0xff, 0x14, 0x25, 1, 2, 3, 4 }, 7, 1, "call *disp32 (SIB, no base)" },
		{ { 0xff, 0x50, 0x08 }, 3, 1, "call *8(%rax)" },
		{ { 0xff, 0x54, 0x24, 0x08 }, 4, 1, "call *8(%rsp)" },
		{ { 0xff, 0x90, 1, 2, 3, 4 }, 6, 1, "call *disp32(%rax)" },
		{ { 0xff, 0x94, 0xc1, 1, 2, 3, 4 }, 7, 1, "call *disp32(%rcx,%rax,8)" },
		{ { 0xff, 0xe0 }, 2, 0, "jmp *%rax (ff /4)" },
		{ { 0xff, 0xc0 }, 2, 0, "inc %eax (ff /0)" },
		{ { 0xff, 0x15, 1, 2 }, 4, 0, "ff 15 cut short" },
		{ { 0x48, 0x89, 0xc7, 0xc3 }, 4, 0, "mov; ret" },
		{ { '2', '0', '3', '6' }, 4, 0, "the text 2036" },
		{ { 0 }, 8, 0, "zeros" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		CHECK(ends_in_call(cases[i].code, cases[i].len) == cases[i].call, "%s",
		      cases[i].what);
	return check_summary("t_unwind");
}
