/* out_dump.c: text and JSON output of dump. */
#include <stdio.h>
#include <stdlib.h>
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

void dump_vars_add(void *arg, uint64_t proto, int32_t line, const struct vm_var *vars, int nvars,
		   const char *note)
{
	struct dump_vars *dv = arg;
	(void)line;
	if (dv->n == dv->cap) {
		int nc = dv->cap ? 2 * dv->cap : 16;
		struct dump_frame_vars *q = realloc(dv->f, (size_t)nc * sizeof *q);
		if (!q)
			return;
		dv->f = q;
		dv->cap = nc;
	}
	struct dump_frame_vars *e = &dv->f[dv->n];
	memset(e, 0, sizeof *e);
	e->proto = proto;
	e->note = note ? strdup(note) : NULL;
	e->vars = nvars > 0 ? calloc((size_t)nvars, sizeof *e->vars) : NULL;
	for (int i = 0; e->vars && i < nvars; i++) {
		e->vars[i] = vars[i];
		e->vars[i].value = strdup(vars[i].value ? vars[i].value : "");
		if (!e->vars[i].value)
			break;
		e->nvars = i + 1;
	}
	dv->n++;
}

void dump_vars_clear(struct dump_vars *dv)
{
	for (int i = 0; i < dv->n; i++) {
		for (int k = 0; k < dv->f[i].nvars; k++)
			free((char *)dv->f[i].vars[k].value);
		free(dv->f[i].vars);
		free(dv->f[i].note);
	}
	dv->n = 0;
}

/* A frame running on a JIT trace keeps some values in registers: the
 * stack slots read are the last ones written there. */
static const char trace_note[] = "on a JIT trace: values as last written to the Lua stack";

void out_dump_frame_vars(FILE *f, int json, struct dump_vars *dv, const struct frame *fr, int *cur)
{
	struct dump_frame_vars *v = dump_vars_for(dv, fr, cur);
	const char *note = v ? (v->note ? v->note : fr->trace > 0 ? trace_note : NULL) : NULL;
	if (!v && (!dv || fr->kind != FRAME_LUA))
		return;
	if (!v)
		note = "no locals: frame not matched to the walk";
	if (json)
		out_dump_vars_json(f, v ? v->vars : NULL, v ? v->nvars : 0, note);
	else
		out_dump_vars_text(f, v ? v->vars : NULL, v ? v->nvars : 0, note);
}

/* The entry of DV for Lua frame FR: the first unused one of its
 * prototype at or after *CUR (then from the start), or NULL. */
struct dump_frame_vars *dump_vars_for(struct dump_vars *dv, const struct frame *fr, int *cur)
{
	if (!dv || fr->kind != FRAME_LUA || !fr->addr)
		return NULL;
	for (int pass = 0; pass < 2; pass++)
		for (int i = pass ? 0 : *cur; i < dv->n; i++)
			if (!dv->f[i].used && dv->f[i].proto == fr->addr) {
				dv->f[i].used = 1;
				*cur = i + 1;
				return &dv->f[i];
			}
	return NULL;
}

void out_dump_thread_text(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vmstate, const char *error,
			  int native_cut, struct dump_vars *dv)
{
	int cur = 0;
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
		out_dump_frame_vars(f, 0, dv, fr, &cur);
	}
}

void out_dump_thread_json(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vm, const char *vmstate,
			  const char *error, int native_cut, struct dump_vars *dv)
{
	int cur = 0;
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
		out_dump_frame_vars(f, 1, dv, fr, &cur);
		fputc('}', f);
	}
	fputs("]}", f);
}

/* ---- dump --locals ---- */

/* S with control characters as '?': a local's name, a chunk name in a
 * function's value come from the target and reach a terminal. */
static void put_text(FILE *f, const char *s)
{
	for (; *s; s++)
		putc((unsigned char)*s < 32 || *s == 127 ? '?' : *s, f);
}

void out_dump_vars_text(FILE *f, const struct vm_var *vars, int nvars, const char *note)
{
	if (note)
		fprintf(f, "        (%s)\n", note);
	for (int i = 0; i < nvars; i++) {
		fprintf(f, "        %s ", vars[i].upvalue ? "upvalue" : "local");
		put_text(f, vars[i].name ? vars[i].name : "?");
		fputs(" = ", f);
		put_text(f, vars[i].value);
		putc('\n', f);
	}
}

void out_dump_vars_json(FILE *f, const struct vm_var *vars, int nvars, const char *note)
{
	for (int up = 0; up < 2; up++) {
		fputs(up ? ",\"upvalues\":[" : ",\"locals\":[", f);
		int k = 0;
		for (int i = 0; i < nvars; i++) {
			if (vars[i].upvalue != up)
				continue;
			fputs(k++ ? ",{\"name\":" : "{\"name\":", f);
			if (vars[i].name)
				out_put_json(f, vars[i].name);
			else
				fputs("null", f);
			fputs(",\"value\":", f);
			out_put_json(f, vars[i].value);
			fputc('}', f);
		}
		fputc(']', f);
	}
	if (note) {
		fputs(",\"locals_note\":", f);
		out_put_json(f, note);
	}
}
