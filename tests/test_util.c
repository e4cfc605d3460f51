/* test_util.c - arena, strmap, base64, emit, philox, fileio, bgwrite, pool. */
#include "util/arena.h"
#include "util/base64.h"
#include "util/bgwrite.h"
#include "util/emit.h"
#include "util/fileio.h"
#include "util/join.h"
#include "util/philox.h"
#include "util/pool.h"
#include "util/strmap.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

Test(arena, alignment_big_blocks_and_zeroing)
{
	struct arena a;
	arena_init(&a);
	for (int i = 1; i < 2000; i++) {
		uint8_t *p = arena_alloc(&a, (size_t)i);
		cr_assert(p);
		cr_assert_eq((uintptr_t)p % 16, 0);
		memset(p, 0xab, (size_t)i);
	}
	uint8_t *big = arena_zalloc(&a, 10u << 20);
	cr_assert(big);
	cr_assert_eq(big[0], 0);
	cr_assert_eq(big[(10u << 20) - 1], 0);
	cr_assert_null(arena_array(&a, SIZE_MAX / 2, 4), "overflowing array size must fail");
	cr_assert_str_eq(arena_printf(&a, "%s-%d", "x", 42), "x-42");
	arena_free(&a);
}

/* Strings are packed back to back, apart from aligned blocks; all survive a mix of both and reset. */
Test(arena, strings_packed_and_reset)
{
	struct arena a;
	arena_init(&a);
	char *s[3000];
	int breaks = 0;
	for (int i = 0; i < 3000; i++) {
		char buf[32];
		snprintf(buf, sizeof buf, "t%d_recompute", i);
		s[i] = arena_strdup(&a, buf);
		cr_assert(s[i]);
		if (i % 7 == 0)
			cr_assert_eq((uintptr_t)arena_alloc(&a, 24) % 16, 0);
		breaks += i && s[i - 1] + strlen(s[i - 1]) + 1 != s[i];
	}
	cr_assert_leq(breaks, 1, "45 KB of strings: one string chunk, perhaps a second");
	for (int i = 0; i < 3000; i++) {
		char buf[32];
		snprintf(buf, sizeof buf, "t%d_recompute", i);
		cr_assert_str_eq(s[i], buf);
	}
	cr_assert_eq(s[2] - s[1], (ptrdiff_t)strlen(s[1]) + 1, "no padding between strings");
	arena_reset(&a);
	cr_assert_str_eq(arena_strdup(&a, "again"), "again");
	cr_assert_eq((uintptr_t)arena_alloc(&a, 8) % 16, 0);
	arena_free(&a);
}

Test(join, parts_truncation_and_decimals)
{
	char buf[8], k[21];
	cr_assert_eq(JOIN(buf, sizeof buf, "ab", "", "cd"), 4);
	cr_assert_str_eq(buf, "abcd");
	cr_assert_eq(JOIN(buf, sizeof buf, "abcde", "fghij"), 7, "cut to fit, terminated");
	cr_assert_str_eq(buf, "abcdefg");
	cr_assert_str_eq(u64_dec(k, 0), "0");
	cr_assert_str_eq(u64_dec(k, 9203), "9203");
	cr_assert_str_eq(u64_dec(k, UINT64_MAX), "18446744073709551615");
}

Test(strmap, many_keys_and_replacement)
{
	struct strmap m;
	struct arena a;
	strmap_init(&m);
	arena_init(&a);
	enum { N = 100000 };
	char **keys = malloc(N * sizeof *keys);
	for (int i = 0; i < N; i++) {
		keys[i] = arena_printf(&a, "/layer%d/MatMul_output_0", i);
		cr_assert_eq(strmap_put(&m, keys[i], (void *)(intptr_t)(i + 1)), 0);
	}
	cr_assert_eq(m.len, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq((intptr_t)strmap_get(&m, keys[i]), i + 1);
	cr_assert_null(strmap_get(&m, "/layer100000/MatMul_output_0"));
	strmap_put(&m, keys[7], (void *)(intptr_t)-1);
	cr_assert_eq((intptr_t)strmap_get(&m, keys[7]), -1);
	cr_assert_eq(m.len, N);
	free(keys);
	strmap_free(&m);
	arena_free(&a);
}

Test(base64, rfc4648_vectors_and_rejects)
{
	/* RFC 4648 section 10 test vectors */
	const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (int i = 0; i < 7; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		base64_write(f, (const uint8_t *)plain[i], strlen(plain[i]));
		fclose(f);
		cr_assert_str_eq(buf, enc[i]);
		uint8_t out[16];
		cr_assert_eq(base64_decode(out, enc[i], strlen(enc[i])), (long long)strlen(plain[i]));
		cr_assert_eq(memcmp(out, plain[i], strlen(plain[i])), 0);
		free(buf);
	}
	uint8_t out[16];
	cr_assert_eq(base64_decode(out, "Zm9v!", 5), -1);
	cr_assert_eq(base64_decode(out, "Zg==Zg", 6), -1, "data after padding");
}

static char *emit_both(int yaml)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct emit e;
	emit_init(&e, f, yaml);
	emit_obj_begin(&e);
	emit_key(&e, "name");
	emit_str(&e, "a \"b\"\n");
	emit_key(&e, "list");
	emit_arr_begin(&e);
	emit_int(&e, 1);
	emit_obj_begin(&e);
	emit_key(&e, "x");
	emit_double(&e, 0.5);
	emit_key(&e, "y");
	emit_bool(&e, 1);
	emit_obj_end(&e);
	emit_arr_end(&e);
	emit_key(&e, "empty");
	emit_arr_begin(&e);
	emit_arr_end(&e);
	emit_key(&e, "nested");
	emit_obj_begin(&e);
	emit_key(&e, "n");
	emit_null(&e);
	emit_obj_end(&e);
	emit_obj_end(&e);
	fclose(f);
	return buf;
}

Test(emit, json_layout)
{
	char *s = emit_both(0);
	cr_assert_str_eq(s, "{\n  \"name\": \"a \\\"b\\\"\\n\",\n  \"list\": [\n    1,\n    {\n      \"x\": 0.5,\n"
			    "      \"y\": true\n    }\n  ],\n  \"empty\": [],\n  \"nested\": {\n    \"n\": null\n  }\n}\n");
	free(s);
}

Test(emit, yaml_layout)
{
	char *s = emit_both(1);
	cr_assert_str_eq(s, "\"name\": \"a \\\"b\\\"\\n\"\n\"list\":\n  - 1\n  - \"x\": 0.5\n    \"y\": true\n"
			    "\"empty\": []\n\"nested\":\n  \"n\": null\n");
	free(s);
}

Test(philox, known_answer_and_distribution)
{
	/* Known-answer vector from the Random123 distribution (kat_vectors): philox4x32_10 with
	 * counter {0,0,0,0} and key {0,0} gives 6627e8d5 e169c58d bc57ac4c 9b00dbd8. */
	uint32_t r[4];
	philox4x32(0, 0, r);
	cr_assert_eq(r[0], 0x6627e8d5u);
	cr_assert_eq(r[1], 0xe169c58du);
	cr_assert_eq(r[2], 0xbc57ac4cu);
	cr_assert_eq(r[3], 0x9b00dbd8u);
	double sum = 0, sq = 0;
	enum { N = 200000 };
	for (int i = 0; i < N; i++) {
		double v = philox_normal(42, (uint64_t)i);
		sum += v;
		sq += v * v;
		float u = philox_uniform(42, (uint64_t)i);
		cr_assert(u >= 0 && u < 1);
	}
	cr_assert(fabs(sum / N) < 0.01, "mean %g", sum / N);
	cr_assert(fabs(sq / N - 1) < 0.02, "variance %g", sq / N);
}

/* philox_uniforms (blocks of eight counters side by side, vectorised on x86) gives philox_uniform's
 * values: from any first element, for any length, and where the counter's low word wraps. */
Test(philox, uniforms_match_one_at_a_time)
{
	static float u[700];
	const uint64_t firsts[] = {0, 1, 3, 4, 37, 4 * (uint64_t)0xFFFFFFF0u + 2, ((uint64_t)5 << 34) - 129};
	for (size_t f = 0; f < sizeof firsts / sizeof *firsts; f++)
		for (int64_t n = 0; n <= 700; n += n < 70 ? 1 : 157) {
			philox_uniforms(0x5EEDull + f, firsts[f], n, u);
			int64_t bad = 0;
			for (int64_t j = 0; j < n; j++)
				bad += u[j] != philox_uniform(0x5EEDull + f, firsts[f] + (uint64_t)j);
			cr_assert_eq(bad, 0, "first %llu, %lld uniforms: %lld differ", (unsigned long long)firsts[f], (long long)n,
				     (long long)bad);
		}
}

Test(fileio, atomic_output_keeps_old_file_on_abort)
{
	char path[128];
	snprintf(path, sizeof path, "%s/out.txt", tmpdir());
	FILE *f = fopen(path, "w");
	fputs("old", f);
	fclose(f);
	struct outfile o;
	struct gd_err e = {0};
	cr_assert_eq(outfile_open(&o, path, &e), 0);
	fputs("partial new content", o.f);
	outfile_abort(&o);
	size_t len;
	uint8_t *s = slurp(path, &len);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(s, "old", 3), 0);
	free(s);
	cr_assert_eq(outfile_open(&o, path, &e), 0);
	fputs("new", o.f);
	cr_assert_eq(outfile_commit(&o, &e), 0);
	s = slurp(path, &len);
	cr_assert_eq(memcmp(s, "new", 3), 0);
	free(s);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_neq(st.st_mode & 0044, 0, "the result is readable like a normally created file");
}

/* Writes text to path through an outfile; 0 when committed. */
static int put(const char *path, const char *text)
{
	struct outfile o;
	struct gd_err e = {0};
	if (outfile_open(&o, path, &e))
		return -1;
	fputs(text, o.f);
	return outfile_commit(&o, &e);
}

/* How many entries of dir start with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	cr_assert(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* A symlink's target is replaced and the link stays (the link was replaced by a file); a FIFO is
 * written in place (it was replaced, and its reader got nothing); the file replaced keeps its
 * mode. */
Test(fileio, links_are_followed_and_fifos_written_in_place)
{
	char dir[256], target[300], link[300], fifo[300];
	snprintf(dir, sizeof dir, "%s/outdest", tmpdir());
	cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(target, sizeof target, "%s/target.txt", dir);
	snprintf(link, sizeof link, "%s/link.txt", dir);
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	unlink(link);
	unlink(fifo);
	cr_assert_eq(put(target, "old"), 0);
	cr_assert_eq(chmod(target, 0640), 0);
	cr_assert_eq(symlink("target.txt", link), 0);
	cr_assert_eq(put(link, "new"), 0);
	struct stat st;
	cr_assert_eq(lstat(link, &st), 0);
	cr_expect(S_ISLNK(st.st_mode), "the link is still a link");
	size_t len;
	uint8_t *s = slurp(target, &len);
	cr_expect(len == 3 && !memcmp(s, "new", 3), "the target holds the new content");
	free(s);
	cr_assert_eq(stat(target, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0640, "mode %o", st.st_mode & 07777);

	cr_assert_eq(mkfifo(fifo, 0600), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) { /* the reader: what arrives, into fifo.got */
		char got[320], buf[64];
		snprintf(got, sizeof got, "%s.got", fifo);
		alarm(20);
		int in = open(fifo, O_RDONLY);
		FILE *out = fopen(got, "w");
		ssize_t n;
		while (in >= 0 && out && (n = read(in, buf, sizeof buf)) > 0)
			fwrite(buf, 1, (size_t)n, out);
		_exit(out && fclose(out) == 0 ? 0 : 1);
	}
	cr_assert_eq(put(fifo, "through the pipe"), 0);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(lstat(fifo, &st), 0);
	cr_expect(S_ISFIFO(st.st_mode), "the FIFO is still a FIFO");
	char got[320];
	snprintf(got, sizeof got, "%s.got", fifo);
	s = slurp(got, &len);
	cr_expect(len == 16 && !memcmp(s, "through the pipe", 16), "the reader got %zu bytes", len);
	free(s);
	cr_expect_eq(count_prefixed(dir, "."), 2, "no temporary files are left (only . and ..)");
}

/* SIGINT, SIGTERM and SIGHUP remove the temporary file being written, then end the process as the
 * signal would have (a killed write left a hidden .NAME.tmpXXXXXX behind). */
Test(fileio, signals_remove_temporary_files)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	char dir[256], path[300];
	snprintf(dir, sizeof dir, "%s/sigtmp", tmpdir());
	cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof path, "%s/out.onnx", dir);
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		pid_t pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0) {
			struct outfile o;
			struct gd_err e = {0};
			if (outfile_open(&o, path, &e))
				_exit(3);
			fputs("partial", o.f);
			fflush(o.f);
			raise(sigs[i]);
			_exit(4);
		}
		int status;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i], "signal %d: status %#x", sigs[i], status);
		cr_expect_eq(count_prefixed(dir, ".out.onnx"), 0, "signal %d left a temporary file", sigs[i]);
	}
}

Test(fileio, errors_are_reported)
{
	struct filebuf fb;
	struct gd_err e = {0};
	cr_assert_eq(filebuf_open(&fb, "/nonexistent/x.onnx", &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "No such file"), "%s", e.msg);
	struct gd_err e2 = {0};
	cr_assert_eq(filebuf_open(&fb, "/tmp", &e2), GD_EINPUT);
	struct outfile o;
	struct gd_err e3 = {0};
	cr_assert_eq(outfile_open(&o, "/nonexistent-dir/out.onnx", &e3), GD_EINPUT);
}

Test(strmap, delete_keeps_probe_runs_intact)
{
	/* Delete in every order pattern from a crowded small table and check every survivor. */
	struct strmap m;
	struct arena a;
	arena_init(&a);
	for (int round = 0; round < 50; round++) {
		strmap_init(&m);
		enum { N = 200 };
		char *keys[N];
		for (int i = 0; i < N; i++) {
			keys[i] = arena_printf(&a, "k%d_%d", round, i);
			strmap_put(&m, keys[i], (void *)(intptr_t)(i + 1));
		}
		for (int i = round % 7; i < N; i += 3)
			strmap_del(&m, keys[i]);
		for (int i = 0; i < N; i++) {
			int gone = i >= round % 7 && (i - round % 7) % 3 == 0;
			intptr_t v = (intptr_t)strmap_get(&m, keys[i]);
			cr_assert_eq(v, gone ? 0 : i + 1, "round %d key %d", round, i);
		}
		strmap_free(&m);
	}
	arena_free(&a);
}

/* Bytes put through bgwrite in pieces of every size (byte runs, whole chunks and more, and direct
 * puts into the free part of a chunk) come out in order, into a file (written on the thread) and
 * into a stream with no descriptor (fwrite); a full disk is reported, not lost. */
static void bgwrite_pattern(FILE *f, size_t *n)
{
	static const size_t sizes[] = {1, 7, 4096, BGWRITE_CHUNK - 5, 3, BGWRITE_CHUNK, 2 * BGWRITE_CHUNK + 11, 100000};
	uint8_t *buf = malloc(2 * BGWRITE_CHUNK + 11);
	struct bgwrite w;
	bgwrite_open(&w, f);
	*n = 0;
	for (int round = 0; round < 3; round++)
		for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
			for (size_t i = 0; i < sizes[s]; i++)
				buf[i] = (uint8_t)((*n + i) * 2654435761u >> 13);
			bgwrite_put(&w, buf, sizes[s]);
			*n += sizes[s];
			uint8_t *end, *at = bgwrite_free(&w, &end);
			cr_assert(at && end > at);
			size_t k = (size_t)(end - at) < 5 ? (size_t)(end - at) : 5;
			for (size_t i = 0; i < k; i++)
				at[i] = (uint8_t)((*n + i) * 2654435761u >> 13);
			bgwrite_wrote(&w, k);
			*n += k;
			if (s == 2)
				bgwrite_flush(&w);
		}
	cr_assert_eq(bgwrite_close(&w), 0);
	free(buf);
}

static void bgwrite_check(const uint8_t *p, size_t len, size_t n)
{
	cr_assert_eq(len, n);
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(i * 2654435761u >> 13))
			cr_assert_fail("byte %zu of %zu differs", i, n);
}

Test(bgwrite, chunks_arrive_in_order_and_errors_are_kept)
{
	char path[128];
	snprintf(path, sizeof path, "%s/bg.bin", tmpdir());
	FILE *f = fopen(path, "wb");
	size_t n, len;
	bgwrite_pattern(f, &n);
	fclose(f);
	uint8_t *s = slurp(path, &len);
	bgwrite_check(s, len, n);
	free(s);

	char *mem = NULL;
	size_t mlen = 0;
	f = open_memstream(&mem, &mlen);
	bgwrite_pattern(f, &n);
	fclose(f);
	bgwrite_check((const uint8_t *)mem, mlen, n);
	free(mem);

	f = fopen("/dev/full", "wb");
	cr_assert(f);
	struct bgwrite w;
	bgwrite_open(&w, f);
	uint8_t *big = calloc(3, BGWRITE_CHUNK);
	bgwrite_put(&w, big, 3 * (size_t)BGWRITE_CHUNK);
	cr_assert_eq(bgwrite_close(&w), ENOSPC);
	fclose(f);
	free(big);
}

/* pool_for calls each index once, each with a thread number below pool_threads(), over several
 * threads when there are several (the first index to run holds its thread until another index
 * has run: the others must go to another thread), and the caller only when there is one; back
 * to back calls and a nested call (run by its caller) too. */
struct pool_probe {
	_Atomic int calls[1000];
	_Atomic int by[POOL_MAX];
	_Atomic int first; /* an index has started */
	_Atomic int gate;  /* an index other than the first has run */
	int nested;
};

static void probe_inner(void *arg, uint32_t i, uint32_t w)
{
	struct pool_probe *p = arg;
	p->calls[500 + i]++;
	p->by[w]++;
}

static void probe(void *arg, uint32_t i, uint32_t w)
{
	struct pool_probe *p = arg;
	p->calls[i]++;
	p->by[w]++;
	if (pool_threads() > 1 && !atomic_exchange(&p->first, 1))
		for (long k = 0; k < 2000000000L && !p->gate; k++)
			;
	else
		p->gate = 1;
	if (p->nested && i == 1)
		pool_for(3, probe_inner, p);
}

Test(pool, each_index_once_over_the_threads)
{
	for (int threads = 1; threads <= 3; threads += 2) {
		pool_set_threads(threads);
		cr_assert_eq(pool_threads(), threads);
		for (int round = 0; round < 20; round++) {
			static struct pool_probe p;
			memset(&p, 0, sizeof p);
			p.nested = round == 0;
			pool_for(400, probe, &p);
			for (int i = 0; i < 400; i++)
				cr_assert_eq(p.calls[i], 1, "threads %d round %d: index %d ran %d times", threads, round, i,
					     p.calls[i]);
			for (int i = 0; i < 3; i++)
				cr_assert_eq(p.calls[500 + i], round == 0, "nested index %d", i);
			int used = 0, sum = 0;
			for (int w = 0; w < POOL_MAX; w++) {
				cr_assert(w < threads || !p.by[w], "thread %d of %d", w, threads);
				used += p.by[w] > 0;
				sum += p.by[w];
			}
			cr_assert_eq(sum, 400 + (round == 0 ? 3 : 0));
			cr_assert(threads == 1 ? used == 1 : used >= 2, "threads %d: %d used", threads, used);
		}
	}
	pool_set_threads(1);
	pool_set_threads(0);
	cr_expect_eq(pool_threads(), 1, "clamped");
	pool_set_threads(1000);
	cr_expect_eq(pool_threads(), POOL_MAX, "clamped");
	pool_set_threads(1);
}

/* philox_uniforms (eight blocks side by side, then single blocks, then single words) gives what
 * philox_uniform gives element by element, from any first index and for any length. */
Test(philox, uniforms_in_bulk_are_the_uniforms_one_by_one)
{
	static float got[300];
	const uint64_t firsts[] = {0, 1, 3, 4, 5, 1ull << 33, (1ull << 34) - 2};
	const int64_t lens[] = {0, 1, 3, 4, 31, 32, 33, 100, 300};
	for (size_t f = 0; f < sizeof firsts / sizeof *firsts; f++)
		for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
			philox_uniforms(0x1234567890abcdefull, firsts[f], lens[l], got);
			for (int64_t j = 0; j < lens[l]; j++)
				cr_assert_eq(got[j], philox_uniform(0x1234567890abcdefull, firsts[f] + (uint64_t)j),
					     "first %llu, length %lld, element %lld", (unsigned long long)firsts[f],
					     (long long)lens[l], (long long)j);
		}
}

/* #50 mpi: UTF-8 as RFC 3629 reads it (util/utf8.h): the length of each well-formed sequence, 0 for
 * a byte that starts none (overlong forms, surrogates, past U+10FFFF, cut short). */
#include "util/utf8.h"

Test(utf8, well_formed_sequences_only)
{
	static const struct {
		const char *s;
		size_t len;
		uint32_t cp;
	} cases[] = {
		{"a", 1, 'a'},           {"\xc3\xbf", 2, 0xff},        {"\xe2\x82\xac", 3, 0x20ac}, {"\xf0\x9f\x98\x80", 4, 0x1f600},
		{"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
		{"\xff", 0, 0},          {"\xc3", 0, 0},               {"\xc0\xaf", 0, 0},          {"\xe0\x80\xaf", 0, 0},
		{"\xed\xa0\x80", 0, 0},  {"\xf4\x90\x80\x80", 0, 0},   {"\x80", 0, 0},              {"\xe2\x82", 0, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint32_t cp = 0;
		size_t n = strlen(cases[i].s), k = utf8_decode((const uint8_t *)cases[i].s, n, &cp);
		cr_expect_eq(k, cases[i].len, "case %zu: %zu", i, k);
		cr_expect(!k || cp == cases[i].cp, "case %zu: U+%x", i, cp);
		cr_expect_eq(utf8_valid((const uint8_t *)cases[i].s, n), cases[i].len == n, "case %zu", i);
	}
}
