/* vm.c: trying each VM family on a target. */
#include <stdio.h>
#include "err.h"
#include "msg.h"
#include "vm.h"

static const struct vm_ops *const families[] = { &vm_luajit_ops, &vm_puc_ops };

int vm_probe(struct target *t, unsigned flags, char *why, size_t whylen)
{
	int unsupported = 0;
	why[0] = 0;
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
		const struct vm_ops *ops = families[i];
		struct vm *vm = NULL;
		char w[512] = "";
		msg_debug(1, "probing for %s", ops->family);
		int rc = ops->probe(t, flags, &vm, w, sizeof w);
		if (rc > 0 && vm) {
			t->vm = vm;
			t->vm_ops = ops;
			if (ops->describe)
				msg_debug(1, "found %s", ops->describe(vm));
			return 0;
		}
		if (rc < 0 && !unsupported) {
			unsupported = 1;
			snprintf(why, whylen, "%s", w[0] ? w : err_text(rc));
			msg_debug(1, "%s: %s", ops->family, why);
		}
	}
	return unsupported ? -LS_E_UNSUPPORTED : -LS_E_NOTLUA;
}
