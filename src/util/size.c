/* size.c - byte sizes; see size.h. */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

int size_parse(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		double mult;
	} units[] = {{"", 1}, {"b", 1}, {"k", 1e3}, {"kb", 1e3}, {"m", 1e6}, {"mb", 1e6}, {"g", 1e9}, {"gb", 1e9},
		     {"t", 1e12}, {"tb", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0},
		     {"tib", 1099511627776.0}};
	char *end;
	errno = 0;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	double v = strtod(s, &end);
	if (errno)
		return -1;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < sizeof units / sizeof *units; i++)
		if (!strcasecmp(end, units[i].unit)) {
			double b = v * units[i].mult;
			if (b >= 18446744073709551616.0)
				return -1;
			*out = (uint64_t)(b + 0.5);
			return 0;
		}
	return -1;
}

const char *size_format(uint64_t v, char *buf, size_t n)
{
	static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	if (v < 1024) {
		snprintf(buf, n, "%llu B", (unsigned long long)v);
		return buf;
	}
	double d = (double)v / 1024;
	int u = 0;
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	snprintf(buf, n, d >= 100 ? "%.0f %s" : d >= 10 ? "%.1f %s" : "%.2f %s", d, units[u]);
	return buf;
}
