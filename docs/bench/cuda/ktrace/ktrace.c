// ktrace.c: a CUPTI injection library that writes every kernel's start and
// end, in graphs node by node, to a CSV file ($KTRACE_OUT, default
// /tmp/ktrace.csv). The CUDA driver loads it into any process through
// CUDA_INJECTION64_PATH, petal included (it reaches libcuda through purego,
// and a Go program's exit skips atexit, so buffers are flushed every 50 ms
// and when a context is destroyed,
// rather than at exit). Built on the GPU machine by run-ktrace.sh; KT is the
// newest CUpti_ActivityKernelN of the installed headers.
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;
enum { bufBytes = 1 << 20 };

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *maxRecords) {
	*buf = (uint8_t *)aligned_alloc(8, bufBytes);
	*size = bufBytes;
	*maxRecords = 0;
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		KT *k = (KT *)r;
		fprintf(out, "%llu,%llu,%u,%llu,%u,%u,%u,%s\n", (unsigned long long)k->start,
			(unsigned long long)k->end, k->streamId, (unsigned long long)k->graphNodeId,
			k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ, k->correlationId, k->name);
	}
	size_t dropped = 0;
	cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
	if (dropped)
		fprintf(out, "# %zu records dropped\n", dropped);
	fflush(out);
	free(buf);
}

// flush hands every buffer over before the context goes: petal closes its
// context before it exits.
static void CUPTIAPI onResource(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
	if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
		cuptiActivityFlushAll(1);
}

int InitializeInjection(void) {
	CUpti_SubscriberHandle sub;
	const char *p = getenv("KTRACE_OUT");
	out = fopen(p ? p : "/tmp/ktrace.csv", "w");
	if (!out)
		return 0;
	fprintf(out, "start,end,stream,node,blocks,threads,corr,name\n");
	fflush(out);
	if (cuptiActivityRegisterCallbacks(request, complete) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
		fprintf(out, "# CUPTI refused the activity callbacks\n");
		fflush(out);
		return 0;
	}
	if (cuptiSubscribe(&sub, onResource, NULL) == CUPTI_SUCCESS)
		cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE);
	CUptiResult fp = cuptiActivityFlushPeriod(50);
	fprintf(stderr, "ktrace: tracing kernels to %s (flush period: CUPTI result %d)\n", p ? p : "/tmp/ktrace.csv", (int)fp);
	return 1;
}
