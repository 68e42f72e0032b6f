/* vm_locals_value.c: value texts of dump --locals shared by the VM
 * families' vm_ops.locals (vm_puc_locals.c, vm_luajit_locals.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "vm.h"

char *vm_value_string(char *out, size_t outlen, const void *s, size_t len, size_t full_len)
{
	const unsigned char *p = s;
	size_t o = 0;
	if (outlen < 8) {
		if (outlen)
			out[0] = 0;
		return out;
	}
	/* keep room for the closing quote, the cut note and the NUL */
	size_t room = outlen > 40 ? outlen - 40 : outlen - 4;
	out[o++] = '"';
	size_t i;
	for (i = 0; i < len; i++) {
		unsigned char c = p[i];
		char e[5];
		int n;
		if (c == '"' || c == '\\')
			n = snprintf(e, sizeof e, "\\%c", c);
		else if (c == '\n')
			n = snprintf(e, sizeof e, "\\n");
		else if (c == '\r')
			n = snprintf(e, sizeof e, "\\r");
		else if (c == '\t')
			n = snprintf(e, sizeof e, "\\t");
		else if (c < 32 || c >= 127)
			n = snprintf(e, sizeof e, "\\x%02x", c);
		else
			n = snprintf(e, sizeof e, "%c", c);
		if (o + (size_t)n >= room)
			break;
		memcpy(out + o, e, (size_t)n);
		o += (size_t)n;
	}
	out[o++] = '"';
	out[o] = 0;
	if (i < full_len)
		snprintf(out + o, outlen - o, "... (%zu bytes)", full_len);
	return out;
}

char *vm_value_number(char *out, size_t outlen, double v, int float_mark)
{
	if (v != v)
		snprintf(out, outlen, "%snan", signbit(v) ? "-" : "");
	else if (isinf(v))
		snprintf(out, outlen, "%sinf", v < 0 ? "-" : "");
	else {
		snprintf(out, outlen, "%.14g", v);
		if (float_mark && !strpbrk(out, ".eEn") && strlen(out) + 3 <= outlen)
			strcat(out, ".0");
	}
	return out;
}
