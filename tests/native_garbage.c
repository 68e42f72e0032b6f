/* tests/native_garbage.c: native stacks whose words are not return
 * addresses, for native-no-invented-frames.test.
 *   garbage_lie: main -> outer -> liar; liar (assembly) pushes the text
 *     "2036" (0x36333032) and a Lua-like value (0xbb8) and spins, while
 *     its CFI still says the return address is at [rsp]: the unwinder
 *     reads 0xbb8 as a return address.
 *   garbage_decoy: main -> outer -> code in an anonymous executable
 *     mapping (no CFI) that pushes the address of decoy() (in .text, but
 *     not after a call) and spins: a stack scan that takes any pointer
 *     into .text restarts at decoy.
 * Usage: native_garbage lie|decoy */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

void liar(void);
__asm__(".text\n"
	".globl liar\n"
	".type liar, @function\n"
	"liar:\n"
	".cfi_startproc\n"
	"\tpushq $0x36333032\n"
	"\tpushq $0xbb8\n"
	"1:\tjmp 1b\n"
	".cfi_endproc\n"
	".size liar, .-liar\n");

volatile unsigned long sink;

__attribute__((noinline)) void decoy(void)
{
	sink++;
}

__attribute__((noinline)) void outer(void (*fn)(void))
{
	fn();
	sink++;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "lie")) {
		outer(liar);
		return 0;
	}
	/* movabs rax, decoy; push rax; push rax; jmp . */
	uint8_t code[16] = { 0x48, 0xb8 };
	uint64_t d = (uint64_t)(uintptr_t)decoy;
	memcpy(code + 2, &d, 8);
	code[10] = 0x50;
	code[11] = 0x50;
	code[12] = 0xeb;
	code[13] = 0xfe;
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(p, code, sizeof code);
	outer((void (*)(void))p);
	return 0;
}
