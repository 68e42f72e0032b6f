/* out_dump.c: text and JSON output of dump. */
#include <stdio.h>
#include <string.h>
#include "out_dump.h"

void json_write_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	fputc('"', f);
	while (*p) {
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
			p++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			p++;
		} else if (c < 0x80) {
			fputc(c, f);
			p++;
		} else {
			/* validate one UTF-8 sequence */
			int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
			if (c >= 0xf5)
				n = 0;
			int ok = n > 0;
			for (int i = 1; ok && i < n; i++)
				if ((p[i] & 0xc0) != 0x80)
					ok = 0;
			if (ok && n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
				ok = 0;
			if (ok && n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
				ok = 0;
			if (ok) {
				fwrite(p, 1, (size_t)n, f);
				p += n;
			} else {
				fputs("\\ufffd", f);
				p++;
			}
		}
	}
	fputc('"', f);
}

const char *dump_state_name(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "disk sleep";
	case 'T': return "stopped";
	case 't': return "tracing stop";
	case 'Z': return "zombie";
	case 'I': return "idle";
	default: return "unknown";
	}
}

void out_dump_thread_text(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vmstate, const char *error)
{
	fprintf(f, "Thread %d \"%s\" (%s)", (int)tid, name, dump_state_name(state));
	if (vmstate)
		fprintf(f, " [%s]", vmstate);
	fputc('\n', f);
	if (error) {
		fprintf(f, "    <error: %s>\n", error);
		return;
	}
	char buf[1024];
	for (int i = 0; i < st->n; i++) {
		const struct frame *fr = &st->f[i];
		frame_label(fr, buf, sizeof buf, 1);
		for (char *c = buf; *c; c++)
			if ((unsigned char)*c < 32)
				*c = '?';
		fprintf(f, "    %s", buf);
		if (fr->trace > 0)
			fprintf(f, " [JIT trace %d]", fr->trace);
		fputc('\n', f);
	}
}

void out_dump_thread_json(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vm, const char *vmstate,
			  const char *error)
{
	fprintf(f, "{\"tid\":%d,\"name\":", (int)tid);
	json_write_string(f, name);
	fputs(",\"state\":", f);
	json_write_string(f, dump_state_name(state));
	if (vm) {
		fputs(",\"vm\":", f);
		fputs(vm, f); /* already JSON */
	}
	if (vmstate) {
		fputs(",\"vmstate\":", f);
		json_write_string(f, vmstate);
	}
	if (error) {
		fputs(",\"error\":", f);
		json_write_string(f, error);
	}
	fputs(",\"frames\":[", f);
	for (int i = 0; st && i < st->n; i++) {
		const struct frame *fr = &st->f[i];
		if (i)
			fputc(',', f);
		fputs("{\"kind\":", f);
		json_write_string(f, frame_kind_name(fr->kind));
		fputs(",\"name\":", f);
		json_write_string(f, fr->name);
		if (fr->module) {
			fputs(",\"module\":", f);
			json_write_string(f, fr->module);
		}
		if (fr->kind == FRAME_NATIVE || fr->kind == FRAME_C)
			fprintf(f, ",\"addr\":\"0x%llx\"", (unsigned long long)fr->addr);
		if (fr->file) {
			fputs(",\"file\":", f);
			json_write_string(f, fr->file);
		}
		if (fr->line > 0)
			fprintf(f, ",\"line\":%d", fr->line);
		if (fr->firstline > 0)
			fprintf(f, ",\"firstline\":%d", fr->firstline);
		if (fr->trace > 0)
			fprintf(f, ",\"trace\":%d", fr->trace);
		fputc('}', f);
	}
	fputs("]}", f);
}
