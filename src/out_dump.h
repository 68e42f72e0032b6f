/* out_dump.h: the text and JSON shapes of `luaspy dump`. */
#ifndef LUASPY_OUT_DUMP_H
#define LUASPY_OUT_DUMP_H

#include <stdio.h>
#include <sys/types.h>
#include "frame.h"
#include "out.h"
#include "vm.h"

/* Human name of a scheduler state letter: "running", "sleeping", ... */
const char *dump_state_name(char state);

/* dump --locals: the variables vm_ops.locals reported for the Lua
 * frames of one stack, innermost first (cmd_dump.c collects them). */
struct dump_frame_vars {
	uint64_t proto;         /* the frame's prototype (frame.addr) */
	struct vm_var *vars;    /* values owned (freed by dump_vars_clear) */
	int nvars;
	char *note;             /* or NULL */
	int used;               /* matched to a frame of the stack printed */
};
struct dump_vars {
	struct dump_frame_vars *f;
	int n, cap;
};

/* vm_vars_fn for vm_ops.locals: copies one frame's variables into ARG
 * (a struct dump_vars). */
void dump_vars_add(void *arg, uint64_t proto, int32_t line, const struct vm_var *vars, int nvars,
		   const char *note);
/* The entry of DV for Lua frame FR: the first unused one of its
 * prototype at or after *CUR (then from the start; *CUR = 0 for a new
 * stack), marked used; NULL when none (or FR is not a Lua frame). */
struct dump_frame_vars *dump_vars_for(struct dump_vars *dv, const struct frame *fr, int *cur);
/* Print FR's variables from DV (NULL: nothing), text lines or JSON
 * members, as the thread outputs do; a Lua frame without an entry says
 * so. */
void out_dump_frame_vars(FILE *f, int json, struct dump_vars *dv, const struct frame *fr, int *cur);
/* Free what DV holds; DV is empty and reusable after. */
void dump_vars_clear(struct dump_vars *dv);

/* Text: one thread header and its frames, innermost first, 4-space indent.
 * NATIVE_CUT: the native walk ended on an error, not at the outermost
 * frame (native_stack.truncated): the header says "(native walk cut
 * short)" and the frames are those found. */
void out_dump_thread_text(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vmstate, const char *error,
			  int native_cut, struct dump_vars *dv);

/* JSON: one thread object (no trailing comma); NATIVE_CUT as above, as
 * "native_truncated": true/false. DV (or NULL, no --locals): each Lua
 * frame gets the variables of DV's first unused entry of its prototype
 * (the walk's order), "locals" and "upvalues" arrays (text: lines under
 * the frame). */
void out_dump_thread_json(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vm, const char *vmstate,
			  const char *error, int native_cut, struct dump_vars *dv);

/* ---- dump --locals (vm_ops.locals fills struct vm_var) ---- */

/* One frame's variables, text: under the frame line, 8 spaces, one per
 * line: "local n = 42", "upvalue count = 7"; a NOTE line first. */
void out_dump_vars_text(FILE *f, const struct vm_var *vars, int nvars, const char *note);

/* One frame's variables, JSON: `,"locals":[{"name":..,"value":..}],
 * "upvalues":[...]` and `,"locals_note":..` (appended inside the frame
 * object). */
void out_dump_vars_json(FILE *f, const struct vm_var *vars, int nvars, const char *note);

#endif
