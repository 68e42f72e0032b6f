/* out_dump.c: text and JSON output of dump. */
#include <stdio.h>
#include <string.h>
#include "out.h"
#include "out_dump.h"

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
			  const struct stack *st, const char *vmstate, const char *error,
			  int native_cut)
{
	fprintf(f, "Thread %d \"%s\" (%s)", (int)tid, name, dump_state_name(state));
	if (vmstate)
		fprintf(f, " [%s]", vmstate);
	if (native_cut)
		fputs(" (native walk cut short)", f);
	fputc('\n', f);
	if (error)
		fprintf(f, "    <error: %s>\n", error);
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
			  const char *error, int native_cut)
{
	fprintf(f, "{\"tid\":%d,\"name\":", (int)tid);
	out_put_json(f, name);
	fputs(",\"state\":", f);
	out_put_json(f, dump_state_name(state));
	if (vm) {
		fputs(",\"vm\":", f);
		fputs(vm, f); /* already JSON */
	}
	if (vmstate) {
		fputs(",\"vmstate\":", f);
		out_put_json(f, vmstate);
	}
	if (error) {
		fputs(",\"error\":", f);
		out_put_json(f, error);
	}
	fprintf(f, ",\"native_truncated\":%s", native_cut ? "true" : "false");
	fputs(",\"frames\":[", f);
	for (int i = 0; st && i < st->n; i++) {
		const struct frame *fr = &st->f[i];
		if (i)
			fputc(',', f);
		fputs("{\"kind\":", f);
		out_put_json(f, frame_kind_name(fr->kind));
		fputs(",\"name\":", f);
		out_put_json(f, fr->name);
		if (fr->module) {
			fputs(",\"module\":", f);
			out_put_json(f, fr->module);
		}
		if (fr->kind == FRAME_NATIVE || fr->kind == FRAME_C)
			fprintf(f, ",\"addr\":\"0x%llx\"", (unsigned long long)fr->addr);
		if (fr->file) {
			fputs(",\"file\":", f);
			out_put_json(f, fr->file);
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
