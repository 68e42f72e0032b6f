/* out_pprof.c: gzipped pprof profile (src/profile.proto) for
 * `go tool pprof`.
 *
 * Mapping of the aggregate:
 *   used frame id    -> Location (ids 1.. in frame id order, frames no
 *                       stack uses are left out) with one Line;
 *                       native/C frames with a module get its Mapping and
 *                       their pc as address
 *   (kind, name, file, module, firstline) -> Function, named by
 *                       frame_label without the line: Lua functions
 *                       "name (chunk:firstline)" so anonymous ones stay
 *                       apart, native/C ones "name (module)" so go tool
 *                       pprof (which merges by name) keeps modules
 *                       apart; system_name is the bare name
 *   module           -> Mapping (filename = module, symbolized already)
 *   (tid, stack)     -> Sample {leaf-first locations, [count, cpu ns],
 *                       label tid}
 *
 * The message is streamed as concatenated Profile messages, which
 * protobuf merges by appending repeated fields, so readers see one
 * Profile: {sample_type, mapping}, then the locations LOC_BATCH at a
 * time, then {function, string_table, the scalars}, then every sample as
 * its own Profile. The bytes are those of one Profile with the samples
 * at the end, and memory stays bounded by a batch, not the profile.
 *
 * Messages are packed straight into the deflate input block (size first,
 * then protobuf_c_message_pack), not through protobuf-c's append
 * callback, which copies each field on its own.
 *
 * Deflate runs at Z_BEST_SPEED: on 100 000 stacks of 50 frames (22 MB of
 * protobuf) level 6 took 0.79 s and level 1 0.39 s, for a file 4 %
 * larger; pprof readers take any level.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "htab.h"
#include "out.h"
#include "profile.pb-c.h"

/* ------------------------------------------------------------ gzip sink */

struct gz_sink {
	ProtobufCBuffer base;  /* first: protobuf-c calls base.append */
	z_stream z;
	FILE *f;
	int err;               /* 0 or -errno */
	size_t nin;
	unsigned char in[1 << 16];
	unsigned char out[1 << 16];
};

static void gz_run(struct gz_sink *s, int flush)
{
	s->z.next_in = s->in;
	s->z.avail_in = (uInt)s->nin;
	do {
		s->z.next_out = s->out;
		s->z.avail_out = sizeof s->out;
		int zr = deflate(&s->z, flush);
		if (zr == Z_STREAM_ERROR) {
			s->err = -EIO;
			return;
		}
		size_t have = sizeof s->out - s->z.avail_out;
		if (have && fwrite(s->out, 1, have, s->f) != have) {
			s->err = errno > 0 ? -errno : -EIO;
			return;
		}
	} while (s->z.avail_out == 0 || s->z.avail_in > 0);
	s->nin = 0;
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_sink *s = (struct gz_sink *)b;
	while (len && !s->err) {
		size_t room = sizeof s->in - s->nin;
		size_t n = len < room ? len : room;
		memcpy(s->in + s->nin, data, n);
		s->nin += n;
		data += n;
		len -= n;
		if (s->nin == sizeof s->in)
			gz_run(s, Z_NO_FLUSH);
	}
}

/* Pack M into the sink: in place when it fits in the input block, else
 * (a message bigger than the block) through protobuf-c's append. */
static void gz_pack(struct gz_sink *s, const ProtobufCMessage *m)
{
	if (s->err)
		return;
	size_t n = protobuf_c_message_get_packed_size(m);
	if (n > sizeof s->in - s->nin)
		gz_run(s, Z_NO_FLUSH);
	if (n > sizeof s->in - s->nin) {
		protobuf_c_message_pack_to_buffer(m, &s->base);
		return;
	}
	protobuf_c_message_pack(m, s->in + s->nin);
	s->nin += n;
}

/* ------------------------------------------------------------ tables */

/* String table: cleaned copies, deduplicated by content. */
struct strtab {
	char **s;
	size_t n, cap;
	struct htab index;     /* content hash -> string index */
};

struct str_probe {
	const struct strtab *t;
	const char *s;
};

static int str_eq(const void *ctx, uint32_t i)
{
	const struct str_probe *k = ctx;
	return strcmp(k->t->s[i], k->s) == 0;
}

/* Index of S cleaned (NULL = ""), or -1 when out of memory. */
static int64_t strtab_add(struct strtab *t, const char *raw)
{
	char buf[OUT_LABEL_MAX];
	const char *s = out_clean(raw ? raw : "", buf, sizeof buf, 0);
	struct str_probe k = { t, s };
	uint64_t h = htab_fnv1a(HTAB_FNV_INIT, s, strlen(s));
	size_t pos;
	if (htab_reserve(&t->index) < 0)
		return -1;
	int64_t i = htab_find(&t->index, h, str_eq, &k, &pos);
	if (i >= 0)
		return i;
	if (array_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s) < 0 ||
	    !(t->s[t->n] = strdup(s)))
		return -1;
	htab_insert(&t->index, pos, h, (uint32_t)t->n);
	return (int64_t)t->n++;
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	htab_free(&t->index);
}

/* Where a used frame's Location points. */
struct loc_ref {
	uint32_t fn;    /* function id (1-based) */
	uint32_t map;   /* mapping id (1-based), 0 = none */
};

/* Everything built before streaming the locations and samples. */
struct pp {
	const struct profile *p;
	struct strtab st;
	Perftools__Profiles__Function *fn;      /* n_fn used, fn_cap allocated */
	size_t n_fn, fn_cap;
	const struct frame **fn_key;            /* representative frame */
	size_t fn_key_cap;
	struct htab fn_index;                   /* fn_hash -> function index */
	Perftools__Profiles__Mapping *map;      /* n_map used, map_cap allocated */
	size_t n_map, map_cap;
	const char **map_module;
	size_t map_module_cap;
	struct loc_ref *ref;                    /* per location (used frame) */
	uint32_t *used;                         /* out_used_frames: id -> loc id */
	size_t nused;
};

static uint64_t fn_hash(const struct frame *fr)
{
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, fr->kind);
	h = htab_fnv1a_ptr(h, fr->name);
	h = htab_fnv1a_ptr(h, fr->file);
	h = htab_fnv1a_ptr(h, fr->module);
	return htab_fnv1a_word(h, (uint32_t)fr->firstline);
}

static int fn_same(const struct frame *a, const struct frame *b)
{
	return a->kind == b->kind && a->name == b->name && a->file == b->file &&
	       a->module == b->module && a->firstline == b->firstline;
}

struct fn_probe {
	const struct pp *pp;
	const struct frame *fr;
};

static int fn_eq(const void *ctx, uint32_t i)
{
	const struct fn_probe *k = ctx;
	return fn_same(k->pp->fn_key[i], k->fr);
}

/* Function id for FR (1-based), creating it; 0 when out of memory. */
static uint64_t fn_get(struct pp *pp, const struct frame *fr)
{
	struct fn_probe k = { pp, fr };
	uint64_t h = fn_hash(fr);
	size_t pos;
	if (htab_reserve(&pp->fn_index) < 0)
		return 0;
	int64_t i = htab_find(&pp->fn_index, h, fn_eq, &k, &pos);
	if (i >= 0)
		return (uint64_t)i + 1;
	if (array_grow(&pp->fn, &pp->fn_cap, pp->n_fn + 1, sizeof *pp->fn) < 0 ||
	    array_grow(&pp->fn_key, &pp->fn_key_cap, pp->n_fn + 1, sizeof *pp->fn_key) < 0)
		return 0;
	/* the label every output shows, module included: pprof merges
	 * Functions by name (and file), so a bare name would join the
	 * same-named code of two modules into one node */
	char label[OUT_LABEL_MAX];
	const char *name = frame_label(fr, label, sizeof label, 0);
	Perftools__Profiles__Function *f = &pp->fn[pp->n_fn];
	perftools__profiles__function__init(f);
	int64_t n = strtab_add(&pp->st, name);
	int64_t sn = strtab_add(&pp->st, fr->name);
	int64_t fl = strtab_add(&pp->st, fr->file);
	if (n < 0 || sn < 0 || fl < 0)
		return 0;
	f->id = pp->n_fn + 1;
	f->name = n;
	f->system_name = sn;
	f->filename = fl;
	f->start_line = fr->firstline > 0 ? fr->firstline : 0;
	pp->fn_key[pp->n_fn] = fr;
	htab_insert(&pp->fn_index, pos, h, (uint32_t)pp->n_fn);
	return ++pp->n_fn;
}

/* Mapping id for MODULE (1-based), creating it; 0 when out of memory. */
static uint64_t map_get(struct pp *pp, const char *module)
{
	for (size_t i = 0; i < pp->n_map; i++)  /* few modules: linear */
		if (pp->map_module[i] == module)
			return i + 1;
	int64_t fl = strtab_add(&pp->st, module);
	if (fl < 0 ||
	    array_grow(&pp->map, &pp->map_cap, pp->n_map + 1, sizeof *pp->map) < 0 ||
	    array_grow(&pp->map_module, &pp->map_module_cap, pp->n_map + 1,
		       sizeof *pp->map_module) < 0)
		return 0;
	Perftools__Profiles__Mapping *m = &pp->map[pp->n_map];
	perftools__profiles__mapping__init(m);
	m->id = pp->n_map + 1;
	m->filename = fl;
	m->has_functions = 1;
	m->has_filenames = 1;
	m->has_line_numbers = 1;
	pp->map_module[pp->n_map++] = module;
	return pp->n_map;
}

/* Functions, mappings and strings, in the order the locations (used
 * frames in id order) first need them. */
static int pp_build(struct pp *pp)
{
	size_t nf = profile_nframes(pp->p);
	if (!(pp->used = out_used_frames(pp->p, &pp->nused)))
		return -ENOMEM;
	if (!(pp->ref = calloc(pp->nused ? pp->nused : 1, sizeof *pp->ref)))
		return -ENOMEM;
	if (strtab_add(&pp->st, "") != 0)
		return -ENOMEM;
	for (size_t id = 0; id < nf; id++) {
		if (!pp->used[id])
			continue;
		const struct frame *fr = profile_frame(pp->p, (uint32_t)id);
		struct loc_ref *r = &pp->ref[pp->used[id] - 1];
		if (!(r->fn = (uint32_t)fn_get(pp, fr)))
			return -ENOMEM;
		if ((fr->kind == FRAME_NATIVE || fr->kind == FRAME_C) && fr->module &&
		    !(r->map = (uint32_t)map_get(pp, fr->module)))
			return -ENOMEM;
	}
	return 0;
}

static void pp_free(struct pp *pp)
{
	strtab_free(&pp->st);
	free(pp->fn);
	free(pp->fn_key);
	htab_free(&pp->fn_index);
	free(pp->map);
	free(pp->map_module);
	free(pp->ref);
	free(pp->used);
}

/* ------------------------------------------------------------ writer */

/* Pack an array of messages into pointer arrays protobuf-c wants. */
#define PTRS(arr, n, type) ({                                     \
	type **_v = calloc((n) ? (n) : 1, sizeof *_v);             \
	if (_v)                                                    \
		for (size_t _i = 0; _i < (n); _i++)                \
			_v[_i] = &(arr)[_i];                       \
	_v; })

/* The locations, LOC_BATCH per Profile message. */
#define LOC_BATCH 1024

static int pp_write_locations(struct pp *pp, struct gz_sink *sink)
{
	Perftools__Profiles__Location *loc = calloc(LOC_BATCH, sizeof *loc);
	Perftools__Profiles__Location **loc_ptr = calloc(LOC_BATCH, sizeof *loc_ptr);
	Perftools__Profiles__Line *line = calloc(LOC_BATCH, sizeof *line);
	Perftools__Profiles__Line **line_ptr = calloc(LOC_BATCH, sizeof *line_ptr);
	int r = 0;
	if (!loc || !loc_ptr || !line || !line_ptr) {
		r = -ENOMEM;
		goto out;
	}
	Perftools__Profiles__Profile batch;
	perftools__profiles__profile__init(&batch);
	batch.location = loc_ptr;
	size_t nf = profile_nframes(pp->p), n = 0;
	for (size_t id = 0; id < nf && !sink->err; id++) {
		if (!pp->used[id])
			continue;
		const struct frame *fr = profile_frame(pp->p, (uint32_t)id);
		size_t k = pp->used[id] - 1;
		Perftools__Profiles__Location *l = &loc[n];
		Perftools__Profiles__Line *ln = &line[n];
		perftools__profiles__location__init(l);
		perftools__profiles__line__init(ln);
		ln->function_id = pp->ref[k].fn;
		ln->line = fr->line > 0 ? fr->line : 0;
		line_ptr[n] = ln;
		l->id = k + 1;
		l->n_line = 1;
		l->line = &line_ptr[n];
		if (fr->kind == FRAME_NATIVE || fr->kind == FRAME_C) {
			l->address = fr->addr;
			l->mapping_id = pp->ref[k].map;
		}
		loc_ptr[n] = l;
		if (++n == LOC_BATCH || k + 1 == pp->nused) {
			batch.n_location = n;
			gz_pack(sink, &batch.base);
			n = 0;
		}
	}
	r = sink->err;
out:
	free(loc);
	free(loc_ptr);
	free(line);
	free(line_ptr);
	return r;
}

static int pp_write(struct pp *pp, struct gz_sink *sink)
{
	const struct profile_meta *m = profile_meta_const(pp->p);
	double period_ns = m->rate_hz > 0 ? 1e9 / m->rate_hz : 0;
	int64_t s_samples = strtab_add(&pp->st, "samples");
	int64_t s_count = strtab_add(&pp->st, "count");
	int64_t s_cpu = strtab_add(&pp->st, "cpu");
	int64_t s_ns = strtab_add(&pp->st, "nanoseconds");
	int64_t s_tid = strtab_add(&pp->st, "tid");
	int64_t comment[2];
	size_t ncomment = 0;
	if (m->title && *m->title)
		comment[ncomment++] = strtab_add(&pp->st, m->title);
	if (m->runtime && *m->runtime)
		comment[ncomment++] = strtab_add(&pp->st, m->runtime);
	if (s_samples < 0 || s_count < 0 || s_cpu < 0 || s_ns < 0 || s_tid < 0 ||
	    (ncomment > 0 && comment[0] < 0) || (ncomment > 1 && comment[1] < 0))
		return -ENOMEM;

	Perftools__Profiles__ValueType vt[2], period_type;
	Perftools__Profiles__ValueType *vtp[2] = { &vt[0], &vt[1] };
	perftools__profiles__value_type__init(&vt[0]);
	perftools__profiles__value_type__init(&vt[1]);
	perftools__profiles__value_type__init(&period_type);
	vt[0].type = s_samples;
	vt[0].unit = s_count;
	vt[1].type = period_type.type = s_cpu;
	vt[1].unit = period_type.unit = s_ns;
	size_t nvalues = period_ns > 0 ? 2 : 1;

	/* The tables: one Profile's fields in field order, split in three. */
	Perftools__Profiles__Profile head;
	perftools__profiles__profile__init(&head);
	head.n_sample_type = nvalues;
	head.sample_type = vtp;
	head.n_mapping = pp->n_map;
	head.mapping = PTRS(pp->map, pp->n_map, Perftools__Profiles__Mapping);
	if (!head.mapping)
		return -ENOMEM;
	gz_pack(sink, &head.base);
	free(head.mapping);
	int r = pp_write_locations(pp, sink);
	if (r < 0)
		return r;

	perftools__profiles__profile__init(&head);
	if (period_ns > 0) {
		head.period_type = &period_type;
		head.period = (int64_t)(period_ns + 0.5);
		head.default_sample_type = s_cpu;
	}
	head.time_nanos = (int64_t)m->start_unix_ns;
	head.duration_nanos = (int64_t)m->duration_ns;
	head.n_comment = ncomment;
	head.comment = comment;
	head.n_function = pp->n_fn;
	head.function = PTRS(pp->fn, pp->n_fn, Perftools__Profiles__Function);
	head.n_string_table = pp->st.n;
	head.string_table = pp->st.s;
	if (!head.function)
		return -ENOMEM;
	gz_pack(sink, &head.base);
	free(head.function);
	if (sink->err)
		return sink->err;

	/* One Profile per sample, appended. */
	size_t cap = 64;
	uint64_t *locs = malloc(cap * sizeof *locs);
	if (!locs)
		return -ENOMEM;
	int64_t values[2];
	Perftools__Profiles__Label label, *labelp = &label;
	Perftools__Profiles__Sample sample, *samplep = &sample;
	Perftools__Profiles__Profile one;
	perftools__profiles__label__init(&label);
	perftools__profiles__sample__init(&sample);
	perftools__profiles__profile__init(&one);
	label.key = s_tid;
	sample.value = values;
	sample.n_value = nvalues;
	one.n_sample = 1;
	one.sample = &samplep;
	size_t ns = profile_nstacks(pp->p);
	for (size_t i = 0; i < ns && !sink->err; i++) {
		pid_t tid;
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(pp->p, i, &tid, &ids, &depth, &count);
		if (count == 0)
			continue;
		if (array_grow(&locs, &cap, depth, sizeof *locs) < 0) {
			free(locs);
			return -ENOMEM;
		}
		for (size_t d = 0; d < depth; d++)
			locs[d] = pp->used[ids[depth - 1 - d]];
		sample.location_id = locs;
		sample.n_location_id = depth;
		values[0] = (int64_t)count;
		values[1] = (int64_t)((double)count * period_ns + 0.5);
		label.num = tid;
		sample.n_label = tid > 0 ? 1 : 0;
		sample.label = &labelp;
		gz_pack(sink, &one.base);
	}
	free(locs);
	return sink->err;
}

int out_pprof_write(const struct profile *p, FILE *f)
{
	struct gz_sink *sink = calloc(1, sizeof *sink);
	struct pp pp = { .p = p };
	int r;
	if (!sink)
		return -ENOMEM;
	sink->base.append = gz_append;
	sink->f = f;
	/* windowBits 15 + 16: gzip wrapper, as pprof expects. */
	if (deflateInit2(&sink->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(sink);
		return -ENOMEM;
	}
	r = pp_build(&pp);
	if (r == 0)
		r = pp_write(&pp, sink);
	if (r == 0) {
		gz_run(sink, Z_FINISH);
		r = sink->err;
	}
	deflateEnd(&sink->z);
	free(sink);
	pp_free(&pp);
	return r ? r : out_ferror(f);
}
