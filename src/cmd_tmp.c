/* cmd_tmp.c: record and top are being written; until then they say so. */
#include "cli.h"
#include "err.h"
#include "msg.h"

int cmd_top(struct cli_opts *o) { msg_error("top: not available in this build yet"); return 1; }
