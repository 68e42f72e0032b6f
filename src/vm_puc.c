/* vm_puc.c: placeholder until the puc walker lands (finds nothing). */
#include "vm.h"

static int probe(struct target *t, struct vm **out, char *why, size_t whylen)
{
	return 0;
}

const struct vm_ops vm_puc_ops = {
	.family = "puc",
	.probe = probe,
};
