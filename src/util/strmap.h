/* strmap.h - string-keyed hash map (open addressing, linear probing).
 *
 * Keys are not copied: they must outlive the map (in graphdiet they live in the graph). The
 * table doubles at 2/3 load, so a lookup is O(1) expected; this is what keeps name resolution
 * linear on million-node graphs. */
#ifndef GD_STRMAP_H
#define GD_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
	const char *key;
	void *val;
	uint64_t hash;
};

struct strmap {
	struct strmap_slot *slots;
	size_t cap, len; /* cap is 0 or a power of two */
};

void strmap_init(struct strmap *m);
void strmap_free(struct strmap *m);
/* The value of key, or NULL (also for a NULL key). */
void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
int strmap_put(struct strmap *m, const char *key, void *val);
int strmap_reserve(struct strmap *m, size_t n);
/* Get-or-insert in one probe: the slot for key, grown beforehand so that filling an empty slot
 * (s->key == NULL) with strmap_fill needs no rehash. NULL when out of memory. */
struct strmap_slot *strmap_slot(struct strmap *m, const char *key);
void strmap_fill(struct strmap *m, struct strmap_slot *s, const char *key, void *val);
uint64_t strmap_hash(const char *s);
/* Removes key if present (backward-shift deletion: no tombstones, lookups stay short). */
void strmap_del(struct strmap *m, const char *key);

#endif
