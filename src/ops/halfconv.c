/* halfconv.c - whole tensors between float16/bfloat16 and float32 (halfconv.h's converters), for
 * the CPU backend's widened runs (exec/cpu.c): one typed loop per tensor, over the pool. Here in
 * ops/ so that it is built as the kernels are (-O3 -fno-trapping-math: the selects vectorise). */
#include "halfconv.h"
#include "kernel.h"

struct half_job {
	const void *p;
	void *o;
	int bf16, narrow;
};

/* name(p, o, n): o[i] = F(p[i]) over n contiguous elements */
#define HC_LOOP(name, ST, DT, F)                                                                               \
	static inline void name(const ST *restrict p, DT *restrict o, int64_t n)                               \
	{                                                                                                      \
		for (int64_t i = 0; i < n; i++)                                                                \
			o[i] = F(p[i]);                                                                        \
	}
HC_LOOP(f16_widen, uint16_t, float, cf_from_f16)
HC_LOOP(bf16_widen, uint16_t, float, cf_from_bf16)
HC_LOOP(f16_narrow, float, uint16_t, cf_f16)
HC_LOOP(bf16_narrow, float, uint16_t, cf_bf16)
#undef HC_LOOP

VM_CLONES static void half_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct half_job *j = arg;
	if (j->narrow && j->bf16)
		bf16_narrow((const float *)j->p + lo, (uint16_t *)j->o + lo, hi - lo);
	else if (j->narrow)
		f16_narrow((const float *)j->p + lo, (uint16_t *)j->o + lo, hi - lo);
	else if (j->bf16)
		bf16_widen((const uint16_t *)j->p + lo, (float *)j->o + lo, hi - lo);
	else
		f16_widen((const uint16_t *)j->p + lo, (float *)j->o + lo, hi - lo);
}

void half_convert(const void *p, void *o, int64_t n, int dt, int narrow)
{
	struct half_job j = {p, o, dt == DT_BFLOAT16, narrow};
	kernel_for(n, KERNEL_GRAIN, half_elems, &j);
}
