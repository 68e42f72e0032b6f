/* out_dump.h: the text and JSON shapes of `luaspy dump`. */
#ifndef LUASPY_OUT_DUMP_H
#define LUASPY_OUT_DUMP_H

#include <stdio.h>
#include <sys/types.h>
#include "frame.h"
#include "out.h"

/* Human name of a scheduler state letter: "running", "sleeping", ... */
const char *dump_state_name(char state);

/* Text: one thread header and its frames, innermost first, 4-space indent.
 * NATIVE_CUT: the native walk ended on an error, not at the outermost
 * frame (native_stack.truncated): the header says "(native walk cut
 * short)" and the frames are those found. */
void out_dump_thread_text(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vmstate, const char *error,
			  int native_cut);

/* JSON: one thread object (no trailing comma); NATIVE_CUT as above, as
 * "native_truncated": true/false. */
void out_dump_thread_json(FILE *f, pid_t tid, const char *name, char state,
			  const struct stack *st, const char *vm, const char *vmstate,
			  const char *error, int native_cut);

#endif
