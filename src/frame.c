/* frame.c: stacks of frames and their labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"

int stack_push(struct stack *st, const struct frame *fr)
{
	if (st->n >= STACK_MAX_FRAMES)
		return -1;
	if (st->n == st->cap) {
		int ncap = st->cap ? st->cap * 2 : 64;
		struct frame *nf = realloc(st->f, (size_t)ncap * sizeof *nf);
		if (!nf)
			return -1;
		st->f = nf;
		st->cap = ncap;
	}
	st->f[st->n++] = *fr;
	return 0;
}

void stack_clear(struct stack *st)
{
	st->n = 0;
}

void stack_free(struct stack *st)
{
	free(st->f);
	st->f = NULL;
	st->n = st->cap = 0;
}

char *frame_label(const struct frame *fr, char *buf, size_t len, int with_line)
{
	const char *name = fr->name ? fr->name : "[unknown]";
	switch (fr->kind) {
	case FRAME_LUA:
		if (fr->file && with_line && fr->line > 0)
			snprintf(buf, len, "%s (%s:%d)", name, fr->file, fr->line);
		else if (fr->file && !with_line && fr->firstline > 0)
			snprintf(buf, len, "%s (%s:%d)", name, fr->file, fr->firstline);
		else if (fr->file)
			snprintf(buf, len, "%s (%s)", name, fr->file);
		else
			snprintf(buf, len, "%s", name);
		break;
	case FRAME_C:
	case FRAME_NATIVE:
		if (fr->module)
			snprintf(buf, len, "%s (%s)", name, fr->module);
		else
			snprintf(buf, len, "%s", name);
		break;
	default:
		snprintf(buf, len, "%s", name);
	}
	return buf;
}

const char *frame_kind_name(int kind)
{
	static const char *const names[FRAME_KIND_MAX] = {
		"native", "lua", "c", "vmstate", "root"
	};
	return kind >= 0 && kind < FRAME_KIND_MAX ? names[kind] : "unknown";
}
