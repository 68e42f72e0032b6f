/* frame.c: stacks of frames and their labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "intern.h"
#include "frame.h"

/* ST is full: the STACK_ELIDE_FRAMES frames just outside its middle go
 * and one FRAME_ELIDED frame "<elided N frames>" at the middle stands
 * for them and for those cut before (its own count, or merge_elide()'s
 * read back from our own interned name), so the innermost and the
 * outermost frames pushed both stay. */
static void stack_elide(struct stack *st)
{
	int mid = STACK_MAX_FRAMES / 2, had = 0, cut = STACK_ELIDE_FRAMES;
	struct frame *m = &st->f[mid];
	if (m->kind != FRAME_ELIDED || !m->name || sscanf(m->name, "<elided %d frames>", &had) != 1)
		had = 1; /* the frame at the middle goes too */
	memmove(&st->f[mid + 1], &st->f[mid + 1 + cut],
		(size_t)(st->n - mid - 1 - cut) * sizeof st->f[0]);
	st->n -= cut;
	*m = (struct frame){ .kind = FRAME_ELIDED, .name = internf("<elided %d frames>", had + cut) };
}

int stack_push(struct stack *st, const struct frame *fr)
{
	if (st->n >= STACK_MAX_FRAMES)
		stack_elide(st);
	size_t cap = st->cap > 0 ? (size_t)st->cap : 0;
	if (array_grow(&st->f, &cap, (size_t)st->n + 1, sizeof *st->f) < 0)
		return -1;
	st->cap = (int)cap; /* <= 2 * STACK_MAX_FRAMES */
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

/* Label text is appended as snprintf would write it: at most LEN-1
 * bytes, then a NUL. Outputs label every frame of a profile (400 000
 * for a large one), where snprintf's format parsing was most of it. */
struct label_out {
	char *buf;
	size_t len;   /* > 0 */
	size_t o;     /* bytes written, < len */
};

static void label_put(struct label_out *l, const char *s, size_t n)
{
	size_t room = l->len - 1 - l->o;
	if (n > room)
		n = room;
	memcpy(l->buf + l->o, s, n);
	l->o += n;
}

static void label_puts(struct label_out *l, const char *s)
{
	label_put(l, s, strlen(s));
}

static void label_int(struct label_out *l, int32_t v)
{
	char tmp[12], *d = tmp + sizeof tmp;
	uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
	do {
		*--d = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--d = '-';
	label_put(l, d, (size_t)(tmp + sizeof tmp - d));
}

/* Is FR's name "MODULE+0x..." for its own module? */
static int is_module_offset(const struct frame *fr)
{
	if (!fr->name || !fr->module)
		return 0;
	size_t n = strlen(fr->module);
	return !strncmp(fr->name, fr->module, n) && !strncmp(fr->name + n, "+0x", 3);
}

int frame_is_unnamed(const struct frame *fr)
{
	return !fr->name || !strcmp(fr->name, "[unknown]") || !strncmp(fr->name, "[C 0x", 5) ||
	       is_module_offset(fr);
}

char *frame_label(const struct frame *fr, char *buf, size_t len, int with_line)
{
	if (len == 0)
		return buf;
	struct label_out l = { buf, len, 0 };
	const char *name = fr->name ? fr->name : "[unknown]";
	label_puts(&l, name);
	switch (fr->kind) {
	case FRAME_LUA:
		if (fr->file) {
			label_put(&l, " (", 2);
			label_puts(&l, fr->file);
			if (with_line && fr->line > 0) {
				label_put(&l, ":", 1);
				label_int(&l, fr->line);
			} else if (!with_line && fr->firstline > 0) {
				label_put(&l, ":", 1);
				label_int(&l, fr->firstline);
			}
			label_put(&l, ")", 1);
		}
		break;
	case FRAME_C:
	case FRAME_NATIVE:
		if (fr->module && !is_module_offset(fr)) {
			label_put(&l, " (", 2);
			label_puts(&l, fr->module);
			label_put(&l, ")", 1);
		}
		break;
	default:
		break;
	}
	buf[l.o] = 0;
	return buf;
}

const char *frame_kind_name(int kind)
{
	static const char *const names[FRAME_KIND_MAX] = {
		"native", "lua", "c", "vmstate", "root", "elided"
	};
	return kind >= 0 && kind < FRAME_KIND_MAX ? names[kind] : "unknown";
}
