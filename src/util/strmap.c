/* strmap.c - string-keyed hash map; see strmap.h. FNV-1a hashing, finalised with a
 * multiply-xorshift so that names differing only in a numeric suffix spread over the table. */
#include "strmap.h"
#include "xalloc.h"

#include <string.h>

uint64_t strmap_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	h ^= h >> 32;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

void strmap_init(struct strmap *m)
{
	memset(m, 0, sizeof *m);
}

void strmap_free(struct strmap *m)
{
	xfree(m->slots);
	memset(m, 0, sizeof *m);
}

static struct strmap_slot *find(const struct strmap *m, const char *key, uint64_t h)
{
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct strmap_slot *s = &m->slots[i];
		if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
			return s;
	}
}

static int grow(struct strmap *m, size_t cap)
{
	struct strmap_slot *old = m->slots;
	size_t oldcap = m->cap;
	m->slots = xcalloc(cap, sizeof *m->slots);
	if (!m->slots) {
		m->slots = old;
		return -1;
	}
	m->cap = cap;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].key)
			*find(m, old[i].key, old[i].hash) = old[i];
	xfree(old);
	return 0;
}

int strmap_reserve(struct strmap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 16;
	while (cap / 3 * 2 < n)
		cap *= 2;
	return cap == m->cap ? 0 : grow(m, cap);
}

void *strmap_get(const struct strmap *m, const char *key)
{
	if (!m->len || !key) /* nor hashing nor a probe into a table reserved but still empty; and a
			       * missing name (an update_binding without its key) names nothing */
		return NULL;
	struct strmap_slot *s = find(m, key, strmap_hash(key));
	return s->key ? s->val : NULL;
}

struct strmap_slot *strmap_slot(struct strmap *m, const char *key)
{
	if (strmap_reserve(m, m->len + 1))
		return NULL;
	uint64_t h = strmap_hash(key);
	struct strmap_slot *s = find(m, key, h);
	if (!s->key)
		s->hash = h;
	return s;
}

void strmap_fill(struct strmap *m, struct strmap_slot *s, const char *key, void *val)
{
	s->key = key;
	s->val = val;
	m->len++;
}

void strmap_del(struct strmap *m, const char *key)
{
	if (!m->cap)
		return;
	size_t mask = m->cap - 1;
	struct strmap_slot *s = find(m, key, strmap_hash(key));
	if (!s->key)
		return;
	size_t i = (size_t)(s - m->slots);
	m->len--;
	/* shift later members of the probe run back into the hole, if that is nearer their home */
	for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		struct strmap_slot *t = &m->slots[j];
		if (!t->key)
			break;
		size_t home = t->hash & mask;
		/* t may move to i unless its home lies cyclically in (i, j] */
		int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			m->slots[i] = *t;
			i = j;
		}
	}
	m->slots[i].key = NULL;
	m->slots[i].val = NULL;
}

int strmap_put(struct strmap *m, const char *key, void *val)
{
	if (strmap_reserve(m, m->len + 1))
		return -1;
	uint64_t h = strmap_hash(key);
	struct strmap_slot *s = find(m, key, h);
	if (!s->key) {
		s->key = key;
		s->hash = h;
		m->len++;
	}
	s->val = val;
	return 0;
}
