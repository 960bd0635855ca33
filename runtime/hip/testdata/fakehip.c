// fakehip is a stand-in for the HIP runtime library (libamdhip64.so) for the
// tests of package hip: every entry point the backend binds, with the C
// signatures and enum values of hip_runtime_api.h, over host memory. It
// cannot run kernels; it records them.
//
//   - Device memory is calloc'd host memory with bookkeeping: unknown
//     pointers and copies that leave an allocation fail with an error code.
//   - A module image is NUL-terminated text, one kernel a line:
//       fakehip kernel=<name> args=<count>
//     so hipModuleLaunchKernel knows how many kernelParams to read.
//   - Every launch appends a line to a log (fakehip_log):
//       launch <kernel> grid=X,Y,Z block=X,Y,Z shared=S args=A,B,... params=P0,...,P15
//     Arguments that point into device memory read d<k>+<offset> (the k-th
//     allocation since fakehip_reset), others their decimal value; params
//     are the 16 int32 at the address the last argument holds (the
//     parameter block), read when the launch runs, or "none".
//   - Stream capture records launches instead of running them; a graph
//     launch replays them into the log as "replay ..." lines, reading the
//     parameter block at replay time. A stream that waits for an event
//     recorded in a capture joins it (its launches are recorded in the
//     capture too), and ending the capture fails with
//     hipErrorStreamCaptureUnjoined unless the capturing stream waited for
//     an event recorded on every joined stream after its last launch.
//   - Asynchronous copies run at once (in stream order, as a real stream
//     would); events record the time for hipEventElapsedTime.
//   - fakehip_fail(fn, code) makes the next call of entry point fn return
//     code; fakehip_device sets what the device reports; fakehip_live
//     counts live objects; fakehip_reset frees everything.
//
// Built by the tests with `cc -shared -fPIC -O1`.

#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int hipError_t;

enum {
	hipSuccess = 0,
	hipErrorInvalidValue = 1,
	hipErrorOutOfMemory = 2,
	hipErrorNotInitialized = 3,
	hipErrorInvalidConfiguration = 9,
	hipErrorInvalidDevicePointer = 17,
	hipErrorInvalidDeviceFunction = 98,
	hipErrorNoDevice = 100,
	hipErrorInvalidDevice = 101,
	hipErrorInvalidImage = 200,
	hipErrorInvalidHandle = 400,
	hipErrorIllegalState = 401,
	hipErrorNotFound = 500,
	hipErrorIllegalAddress = 700,
	hipErrorLaunchFailure = 719,
	hipErrorStreamCaptureUnsupported = 900,
	hipErrorStreamCaptureInvalidated = 901,
	hipErrorStreamCaptureUnjoined = 904,
	hipErrorStreamCaptureImplicit = 906,
};

// hipDeviceAttribute_t values (ROCm 5 and later).
enum {
	hipDeviceAttributeComputeCapabilityMajor = 23,
	hipDeviceAttributeComputeCapabilityMinor = 61,
};

// hipStreamCaptureMode.
enum {
	hipStreamCaptureModeGlobal = 0,
	hipStreamCaptureModeThreadLocal = 1,
	hipStreamCaptureModeRelaxed = 2,
};

#define MAX_ARGS 64
#define PARAM_SLOTS 32
#define VERSION 60443483 // HIP 6.4.43483

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)
#define RETURN(rc)           \
	do {                     \
		hipError_t rc_ = rc; \
		UNLOCK();            \
		return rc_;          \
	} while (0)

// A list of live objects of one kind.
typedef struct {
	void **items;
	int n, cap;
} list;

static void list_add(list *l, void *p) {
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->items = realloc(l->items, l->cap * sizeof(void *));
	}
	l->items[l->n++] = p;
}

static int list_find(list *l, void *p) {
	for (int i = 0; i < l->n; i++) {
		if (l->items[i] == p) {
			return i;
		}
	}
	return -1;
}

static int list_remove(list *l, void *p) {
	int i = list_find(l, p);
	if (i < 0) {
		return 0;
	}
	l->items[i] = l->items[--l->n];
	return 1;
}

typedef struct {
	char *p;
	size_t size;
	int id;
} alloc;

typedef struct {
	char name[256];
	int nargs;
} function;

typedef struct {
	function *funcs;
	int nfuncs;
} module;

typedef struct {
	function f; // a copy: a graph outlives nothing it needs
	unsigned grid[3], block[3], shared;
	uint64_t args[MAX_ARGS];
	int nargs;
	// A copy captured from a stream (a step graph's first and last nodes):
	// n bytes from src to dst when the graph runs, not logged.
	int copy;
	void *dst;
	const void *src;
	size_t n;
} record;

typedef struct {
	record *recs;
	int n, cap;
} records;

typedef struct stream stream;
struct stream {
	int capturing, invalidated;
	records recs;
	stream *origin; // the capturing stream whose capture this one joined
	int ops;        // launches made, for the join check
	int joined;     // the origin waited for this stream after its last launch
};

typedef struct {
	unsigned flags;
	int in_capture, ops, recorded;
	stream *from, *origin;
	struct timespec at;
} event;

typedef struct {
	records recs;
} graph; // also the instantiated graph

static list devmem, hostmem, modules, streams, events, graphs, execs;
static int serial;     // device allocations since reset
static int initialized;
static char *logbuf;
static size_t loglen, logcap;
static char failfn[64];
static int failcode;
static char devname[256] = "gfx1151";
static int major = 11, minor = 5, ndevices = 1;

// fail returns the injected error of fn, once.
static hipError_t fail(const char *fn) {
	if (failcode != 0 && strcmp(failfn, fn) == 0) {
		int rc = failcode;
		failcode = 0;
		return rc;
	}
	return hipSuccess;
}

#define ENTER(fn)                          \
	LOCK();                                \
	do {                                   \
		hipError_t f_ = fail(fn);          \
		if (f_ != hipSuccess) RETURN(f_);  \
	} while (0)

#define ENTER_INIT(fn)                                   \
	ENTER(fn);                                           \
	do {                                                 \
		if (!initialized) RETURN(hipErrorNotInitialized); \
	} while (0)

static int capturing(void) {
	for (int i = 0; i < streams.n; i++) {
		if (((stream *)streams.items[i])->capturing) {
			return 1;
		}
	}
	return 0;
}

// find returns the allocation holding [p, p+n), or NULL.
static alloc *find(const void *p, size_t n) {
	uintptr_t a = (uintptr_t)p;
	for (int i = 0; i < devmem.n; i++) {
		alloc *m = devmem.items[i];
		uintptr_t b = (uintptr_t)m->p;
		if (a >= b && a <= b + m->size) {
			if (n > m->size - (a - b)) {
				return NULL;
			}
			return m;
		}
	}
	return NULL;
}

// within reports whether p points into (or just past) some allocation.
static alloc *within(const void *p) {
	uintptr_t a = (uintptr_t)p;
	for (int i = 0; i < devmem.n; i++) {
		alloc *m = devmem.items[i];
		uintptr_t b = (uintptr_t)m->p;
		if (a >= b && a <= b + m->size) {
			return m;
		}
	}
	return NULL;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void logf_(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (loglen + n + 1 > logcap) {
		logcap = 2 * (loglen + n + 1);
		logbuf = realloc(logbuf, logcap);
	}
	va_start(ap, fmt);
	vsnprintf(logbuf + loglen, n + 1, fmt, ap);
	va_end(ap);
	loglen += n;
}

// run "executes" a launch: it appends the launch to the log.
static void run(const char *via, const record *r) {
	if (r->copy) {
		memmove(r->dst, r->src, r->n);
		return;
	}
	logf_("%s %s grid=%u,%u,%u block=%u,%u,%u shared=%u args=", via, r->f.name,
		r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->shared);
	for (int i = 0; i < r->nargs; i++) {
		const char *sep = i ? "," : "";
		alloc *m = within((void *)(uintptr_t)r->args[i]);
		if (m != NULL) {
			logf_("%sd%d+%llu", sep, m->id, (unsigned long long)(r->args[i] - (uintptr_t)m->p));
		} else {
			logf_("%s%llu", sep, (unsigned long long)r->args[i]);
		}
	}
	logf_(" params=");
	alloc *m = r->nargs ? find((void *)(uintptr_t)r->args[r->nargs - 1], 4 * PARAM_SLOTS) : NULL;
	if (m == NULL) {
		logf_("none");
	} else {
		int32_t p[PARAM_SLOTS];
		memcpy(p, (void *)(uintptr_t)r->args[r->nargs - 1], sizeof p);
		for (int i = 0; i < PARAM_SLOTS; i++) {
			logf_("%s%d", i ? "," : "", p[i]);
		}
	}
	logf_("\n");
}

static void records_add(records *rs, const record *r) {
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? 2 * rs->cap : 16;
		rs->recs = realloc(rs->recs, rs->cap * sizeof(record));
	}
	rs->recs[rs->n++] = *r;
}

static graph *graph_of(const records *rs) {
	graph *g = calloc(1, sizeof *g);
	if (rs->n > 0) {
		g->recs.recs = malloc(rs->n * sizeof(record));
		memcpy(g->recs.recs, rs->recs, rs->n * sizeof(record));
	}
	g->recs.n = g->recs.cap = rs->n;
	return g;
}

static void graph_free(graph *g) {
	free(g->recs.recs);
	free(g);
}

// ---- test hooks ----

void fakehip_reset(void) {
	LOCK();
	for (int i = 0; i < devmem.n; i++) {
		free(((alloc *)devmem.items[i])->p);
		free(devmem.items[i]);
	}
	for (int i = 0; i < hostmem.n; i++) {
		free(hostmem.items[i]);
	}
	for (int i = 0; i < modules.n; i++) {
		free(((module *)modules.items[i])->funcs);
		free(modules.items[i]);
	}
	for (int i = 0; i < streams.n; i++) {
		free(((stream *)streams.items[i])->recs.recs);
		free(streams.items[i]);
	}
	for (int i = 0; i < graphs.n; i++) {
		graph_free(graphs.items[i]);
	}
	for (int i = 0; i < execs.n; i++) {
		graph_free(execs.items[i]);
	}
	for (int i = 0; i < events.n; i++) {
		free(events.items[i]);
	}
	devmem.n = hostmem.n = modules.n = streams.n = events.n = graphs.n = execs.n = 0;
	serial = 0;
	loglen = 0;
	failcode = 0;
	strcpy(devname, "gfx1151");
	major = 11, minor = 5, ndevices = 1;
	UNLOCK();
}

void fakehip_device(const char *name, int maj, int min, int count) {
	LOCK();
	snprintf(devname, sizeof devname, "%s", name);
	major = maj, minor = min, ndevices = count;
	UNLOCK();
}

void fakehip_fail(const char *fn, int code) {
	LOCK();
	snprintf(failfn, sizeof failfn, "%s", fn);
	failcode = code;
	UNLOCK();
}

// fakehip_log copies the log (NUL-terminated, truncated to n-1 bytes) and
// returns its full length.
size_t fakehip_log(char *buf, size_t n) {
	LOCK();
	if (buf != NULL && n > 0) {
		size_t k = loglen < n - 1 ? loglen : n - 1;
		memcpy(buf, logbuf, k);
		buf[k] = 0;
	}
	size_t len = loglen;
	UNLOCK();
	return len;
}

void fakehip_clear_log(void) {
	LOCK();
	loglen = 0;
	UNLOCK();
}

// fakehip_live counts live objects of a kind (device, host, module, stream,
// event, graph, exec), or of all kinds for NULL or "".
int fakehip_live(const char *kind) {
	LOCK();
	int n = -1;
	if (kind == NULL || kind[0] == 0) {
		n = devmem.n + hostmem.n + modules.n + streams.n + events.n + graphs.n + execs.n;
	} else if (strcmp(kind, "device") == 0) {
		n = devmem.n;
	} else if (strcmp(kind, "host") == 0) {
		n = hostmem.n;
	} else if (strcmp(kind, "module") == 0) {
		n = modules.n;
	} else if (strcmp(kind, "stream") == 0) {
		n = streams.n;
	} else if (strcmp(kind, "event") == 0) {
		n = events.n;
	} else if (strcmp(kind, "graph") == 0) {
		n = graphs.n;
	} else if (strcmp(kind, "exec") == 0) {
		n = execs.n;
	}
	UNLOCK();
	return n;
}

// ---- errors and versions ----

static const struct {
	int code;
	const char *name, *desc;
} errors[] = {
	{hipSuccess, "hipSuccess", "no error"},
	{hipErrorInvalidValue, "hipErrorInvalidValue", "invalid argument"},
	{hipErrorOutOfMemory, "hipErrorOutOfMemory", "out of memory"},
	{hipErrorNotInitialized, "hipErrorNotInitialized", "initialization error"},
	{hipErrorInvalidConfiguration, "hipErrorInvalidConfiguration", "invalid configuration argument"},
	{hipErrorInvalidDevicePointer, "hipErrorInvalidDevicePointer", "invalid device pointer"},
	{hipErrorInvalidDeviceFunction, "hipErrorInvalidDeviceFunction", "invalid device function"},
	{hipErrorNoDevice, "hipErrorNoDevice", "no ROCm-capable device is detected"},
	{hipErrorInvalidDevice, "hipErrorInvalidDevice", "invalid device ordinal"},
	{hipErrorInvalidImage, "hipErrorInvalidImage", "device kernel image is invalid"},
	{hipErrorInvalidHandle, "hipErrorInvalidHandle", "invalid resource handle"},
	{hipErrorIllegalState, "hipErrorIllegalState", "the operation cannot be performed in the present state"},
	{hipErrorNotFound, "hipErrorNotFound", "named symbol not found"},
	{hipErrorIllegalAddress, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
	{hipErrorLaunchFailure, "hipErrorLaunchFailure", "unspecified launch failure"},
	{hipErrorStreamCaptureUnsupported, "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
	{hipErrorStreamCaptureInvalidated, "hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
	{hipErrorStreamCaptureUnjoined, "hipErrorStreamCaptureUnjoined", "capture was not joined"},
	{hipErrorStreamCaptureImplicit, "hipErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
};

const char *hipGetErrorName(hipError_t rc) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == rc) {
			return errors[i].name;
		}
	}
	return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t rc) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == rc) {
			return errors[i].desc;
		}
	}
	return "unknown error";
}

hipError_t hipInit(unsigned int flags) {
	ENTER("hipInit");
	if (flags != 0) {
		RETURN(hipErrorInvalidValue);
	}
	initialized = 1;
	RETURN(hipSuccess);
}

hipError_t hipDriverGetVersion(int *v) {
	ENTER("hipDriverGetVersion");
	if (v == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	*v = VERSION;
	RETURN(hipSuccess);
}

hipError_t hipRuntimeGetVersion(int *v) {
	ENTER("hipRuntimeGetVersion");
	if (v == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	*v = VERSION;
	RETURN(hipSuccess);
}

// ---- devices ----

hipError_t hipGetDeviceCount(int *n) {
	ENTER_INIT("hipGetDeviceCount");
	if (n == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	*n = ndevices;
	RETURN(ndevices == 0 ? hipErrorNoDevice : hipSuccess);
}

hipError_t hipSetDevice(int dev) {
	ENTER_INIT("hipSetDevice");
	RETURN(dev < 0 || dev >= ndevices ? hipErrorInvalidDevice : hipSuccess);
}

hipError_t hipDeviceGetName(char *name, int len, int dev) {
	ENTER_INIT("hipDeviceGetName");
	if (dev < 0 || dev >= ndevices) {
		RETURN(hipErrorInvalidDevice);
	}
	if (name == NULL || len <= 0) {
		RETURN(hipErrorInvalidValue);
	}
	snprintf(name, len, "%s", devname);
	RETURN(hipSuccess);
}

hipError_t hipDeviceGetAttribute(int *v, int attr, int dev) {
	ENTER_INIT("hipDeviceGetAttribute");
	if (dev < 0 || dev >= ndevices) {
		RETURN(hipErrorInvalidDevice);
	}
	if (v == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	switch (attr) {
	case hipDeviceAttributeComputeCapabilityMajor:
		*v = major;
		break;
	case hipDeviceAttributeComputeCapabilityMinor:
		*v = minor;
		break;
	default:
		RETURN(hipErrorInvalidValue);
	}
	RETURN(hipSuccess);
}

// ---- memory ----

hipError_t hipMalloc(void **p, size_t size) {
	ENTER_INIT("hipMalloc");
	if (p == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	alloc *m = calloc(1, sizeof *m);
	m->p = calloc(1, size ? size : 1);
	m->size = size;
	m->id = ++serial;
	list_add(&devmem, m);
	*p = m->p;
	RETURN(hipSuccess);
}

hipError_t hipFree(void *p) {
	ENTER_INIT("hipFree");
	if (p == NULL) {
		RETURN(hipSuccess);
	}
	for (int i = 0; i < devmem.n; i++) {
		alloc *m = devmem.items[i];
		if (m->p == p) {
			list_remove(&devmem, m);
			free(m->p);
			free(m);
			RETURN(hipSuccess);
		}
	}
	RETURN(hipErrorInvalidDevicePointer);
}

hipError_t hipHostMalloc(void **p, size_t size, unsigned int flags) {
	ENTER_INIT("hipHostMalloc");
	if (p == NULL || flags != 0) {
		RETURN(hipErrorInvalidValue);
	}
	void *h = calloc(1, size ? size : 1);
	list_add(&hostmem, h);
	*p = h;
	RETURN(hipSuccess);
}

hipError_t hipHostFree(void *p) {
	ENTER_INIT("hipHostFree");
	if (p == NULL) {
		RETURN(hipSuccess);
	}
	if (!list_remove(&hostmem, p)) {
		RETURN(hipErrorInvalidValue);
	}
	free(p);
	RETURN(hipSuccess);
}

// span checks a device range: unknown pointer or overrun.
static hipError_t span(const void *p, size_t n) {
	if (within(p) == NULL) {
		return hipErrorInvalidDevicePointer;
	}
	if (find(p, n) == NULL) {
		return hipErrorInvalidValue;
	}
	return hipSuccess;
}

// pinned reports whether [p, p+n) lies in memory from hipHostMalloc (its
// usable size: the fake does not keep the size asked for).
static int pinned(const void *p, size_t n) {
	for (int i = 0; i < hostmem.n; i++) {
		const char *h = hostmem.items[i];
		if ((const char *)p >= h && (const char *)p + n <= h + malloc_usable_size((void *)h)) {
			return 1;
		}
	}
	return 0;
}

hipError_t hipMemcpyHtoD(void *dst, const void *src, size_t n) {
	ENTER_INIT("hipMemcpyHtoD");
	if (capturing()) {
		RETURN(hipErrorStreamCaptureImplicit);
	}
	hipError_t rc = span(dst, n);
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	if (n > 0 && src == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	memcpy(dst, src, n);
	RETURN(hipSuccess);
}

hipError_t hipMemcpyDtoH(void *dst, void *src, size_t n) {
	ENTER_INIT("hipMemcpyDtoH");
	if (capturing()) {
		RETURN(hipErrorStreamCaptureImplicit);
	}
	hipError_t rc = span(src, n);
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	if (n > 0 && dst == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	memcpy(dst, src, n);
	RETURN(hipSuccess);
}

hipError_t hipMemsetD8(void *dst, unsigned char value, size_t n) {
	ENTER_INIT("hipMemsetD8");
	if (capturing()) {
		RETURN(hipErrorStreamCaptureImplicit);
	}
	hipError_t rc = span(dst, n);
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	memset(dst, value, n);
	RETURN(hipSuccess);
}

hipError_t hipMemGetInfo(size_t *free_, size_t *total) {
	ENTER_INIT("hipMemGetInfo");
	if (free_ == NULL || total == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	size_t used = 0;
	for (int i = 0; i < devmem.n; i++) {
		used += ((alloc *)devmem.items[i])->size;
	}
	*total = (size_t)96 << 30;
	*free_ = *total - used;
	RETURN(hipSuccess);
}

// async checks the stream of an asynchronous copy: known, and not
// capturing (the backend captures launches only).
static hipError_t async(stream *s) {
	if (s != NULL && list_find(&streams, s) < 0) {
		return hipErrorInvalidHandle;
	}
	if (s != NULL && s->capturing) {
		return hipErrorStreamCaptureUnsupported;
	}
	return hipSuccess;
}

// capture_copy records a copy on a capturing stream as a graph node.
static void capture_copy(stream *s, void *dst, const void *src, size_t n) {
	record r = {.copy = 1, .dst = dst, .src = src, .n = n};
	stream *o = s->origin ? s->origin : s;
	records_add(&o->recs, &r);
}

// hipMemcpyHtoDAsync and hipMemcpyDtoHAsync are captured as graph nodes
// when the host side is pinned (hipHostMalloc), as the real runtime allows.
hipError_t hipMemcpyHtoDAsync(void *dst, const void *src, size_t n, stream *s) {
	ENTER_INIT("hipMemcpyHtoDAsync");
	if (s != NULL && list_find(&streams, s) >= 0 && s->capturing) {
		if (span(dst, n) != hipSuccess || !pinned(src, n)) {
			s->invalidated = 1;
			RETURN(hipErrorInvalidValue);
		}
		capture_copy(s, dst, src, n);
		RETURN(hipSuccess);
	}
	hipError_t rc = async(s);
	if (rc == hipSuccess) {
		rc = span(dst, n);
	}
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	memcpy(dst, src, n);
	RETURN(hipSuccess);
}

hipError_t hipMemcpyDtoHAsync(void *dst, void *src, size_t n, stream *s) {
	ENTER_INIT("hipMemcpyDtoHAsync");
	if (s != NULL && list_find(&streams, s) >= 0 && s->capturing) {
		if (span(src, n) != hipSuccess || !pinned(dst, n)) {
			s->invalidated = 1;
			RETURN(hipErrorInvalidValue);
		}
		capture_copy(s, dst, src, n);
		RETURN(hipSuccess);
	}
	hipError_t rc = async(s);
	if (rc == hipSuccess) {
		rc = span(src, n);
	}
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	memcpy(dst, src, n);
	RETURN(hipSuccess);
}

hipError_t hipMemcpyDtoDAsync(void *dst, void *src, size_t n, stream *s) {
	ENTER_INIT("hipMemcpyDtoDAsync");
	hipError_t rc = async(s);
	if (rc == hipSuccess) {
		rc = span(dst, n);
	}
	if (rc == hipSuccess) {
		rc = span(src, n);
	}
	if (rc != hipSuccess) {
		RETURN(rc);
	}
	memmove(dst, src, n);
	RETURN(hipSuccess);
}

// ---- modules ----

hipError_t hipModuleLoadData(module **mod, const void *image) {
	ENTER_INIT("hipModuleLoadData");
	if (mod == NULL || image == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	module *m = calloc(1, sizeof *m);
	const char *s = image;
	while (*s) {
		const char *end = strchr(s, '\n');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		char line[512];
		if (len >= sizeof line) {
			break;
		}
		memcpy(line, s, len);
		line[len] = 0;
		function f = {0};
		if (sscanf(line, "fakehip kernel=%255s args=%d", f.name, &f.nargs) != 2 || f.nargs < 0 || f.nargs > MAX_ARGS) {
			free(m->funcs);
			m->nfuncs = 0;
			break;
		}
		m->funcs = realloc(m->funcs, (m->nfuncs + 1) * sizeof(function));
		m->funcs[m->nfuncs++] = f;
		s += len;
		if (*s == '\n') {
			s++;
		}
	}
	if (m->nfuncs == 0) {
		free(m);
		RETURN(hipErrorInvalidImage);
	}
	list_add(&modules, m);
	*mod = m;
	RETURN(hipSuccess);
}

hipError_t hipModuleUnload(module *m) {
	ENTER_INIT("hipModuleUnload");
	if (!list_remove(&modules, m)) {
		RETURN(hipErrorInvalidHandle);
	}
	free(m->funcs);
	free(m);
	RETURN(hipSuccess);
}

hipError_t hipModuleGetFunction(function **fn, module *m, const char *name) {
	ENTER_INIT("hipModuleGetFunction");
	if (fn == NULL || name == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	if (list_find(&modules, m) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	for (int i = 0; i < m->nfuncs; i++) {
		if (strcmp(m->funcs[i].name, name) == 0) {
			*fn = &m->funcs[i];
			RETURN(hipSuccess);
		}
	}
	RETURN(hipErrorNotFound);
}

// function_live reports whether fn belongs to a loaded module.
static int function_live(const function *fn) {
	for (int i = 0; i < modules.n; i++) {
		module *m = modules.items[i];
		if (fn >= m->funcs && fn < m->funcs + m->nfuncs) {
			return 1;
		}
	}
	return 0;
}

// ---- streams and launches ----

hipError_t hipStreamCreateWithFlags(stream **s, unsigned int flags) {
	ENTER_INIT("hipStreamCreateWithFlags");
	if (s == NULL || flags > 1) {
		RETURN(hipErrorInvalidValue);
	}
	stream *st = calloc(1, sizeof *st);
	list_add(&streams, st);
	*s = st;
	RETURN(hipSuccess);
}

hipError_t hipStreamDestroy(stream *s) {
	ENTER_INIT("hipStreamDestroy");
	if (!list_remove(&streams, s)) {
		RETURN(hipErrorInvalidHandle);
	}
	free(s->recs.recs);
	free(s);
	RETURN(hipSuccess);
}

hipError_t hipStreamSynchronize(stream *s) {
	ENTER_INIT("hipStreamSynchronize");
	if (s != NULL && list_find(&streams, s) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (s != NULL && s->capturing) {
		RETURN(hipErrorStreamCaptureUnsupported);
	}
	RETURN(hipSuccess);
}

hipError_t hipModuleLaunchKernel(function *f, unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, stream *s,
	void **kernelParams, void **extra) {
	LOCK();
	hipError_t rc = fail("hipModuleLaunchKernel");
	if (rc == hipSuccess && !initialized) {
		rc = hipErrorNotInitialized;
	}
	if (rc == hipSuccess && (f == NULL || !function_live(f))) {
		rc = hipErrorInvalidHandle;
	}
	if (rc == hipSuccess && s != NULL && list_find(&streams, s) < 0) {
		rc = hipErrorInvalidHandle;
	}
	if (rc == hipSuccess && (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
		(unsigned long long)bx * by * bz > 1024 || shared > 65536)) {
		rc = hipErrorInvalidConfiguration;
	}
	if (rc == hipSuccess && (extra != NULL || (f->nargs > 0 && kernelParams == NULL))) {
		rc = hipErrorInvalidValue;
	}
	if (rc != hipSuccess) {
		if (s != NULL && list_find(&streams, s) >= 0 && s->capturing) {
			s->invalidated = 1;
		}
		RETURN(rc);
	}
	record r = {.f = *f, .grid = {gx, gy, gz}, .block = {bx, by, bz}, .shared = shared, .nargs = f->nargs};
	for (int i = 0; i < f->nargs; i++) {
		memcpy(&r.args[i], kernelParams[i], sizeof r.args[i]);
	}
	if (s != NULL && s->capturing) {
		stream *o = s->origin ? s->origin : s;
		records_add(&o->recs, &r);
		s->ops++;
		s->joined = 0;
	} else {
		run("launch", &r);
	}
	RETURN(hipSuccess);
}

// ---- events ----

hipError_t hipEventCreateWithFlags(event **e, unsigned int flags) {
	ENTER_INIT("hipEventCreateWithFlags");
	if (e == NULL || flags > 3) {
		RETURN(hipErrorInvalidValue);
	}
	event *ev = calloc(1, sizeof *ev);
	ev->flags = flags;
	list_add(&events, ev);
	*e = ev;
	RETURN(hipSuccess);
}

hipError_t hipEventDestroy(event *e) {
	ENTER_INIT("hipEventDestroy");
	if (!list_remove(&events, e)) {
		RETURN(hipErrorInvalidHandle);
	}
	free(e);
	RETURN(hipSuccess);
}

hipError_t hipEventRecord(event *e, stream *s) {
	ENTER_INIT("hipEventRecord");
	if (list_find(&events, e) < 0 || (s != NULL && list_find(&streams, s) < 0)) {
		RETURN(hipErrorInvalidHandle);
	}
	if (s != NULL && s->capturing) {
		e->in_capture = 1;
		e->from = s;
		e->origin = s->origin ? s->origin : s;
		e->ops = s->ops;
		RETURN(hipSuccess);
	}
	e->in_capture = 0;
	e->recorded = 1;
	clock_gettime(CLOCK_MONOTONIC, &e->at);
	RETURN(hipSuccess);
}

hipError_t hipEventSynchronize(event *e) {
	ENTER_INIT("hipEventSynchronize");
	if (list_find(&events, e) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	RETURN(e->in_capture ? hipErrorStreamCaptureUnsupported : hipSuccess);
}

hipError_t hipEventElapsedTime(float *ms, event *start, event *stop) {
	ENTER_INIT("hipEventElapsedTime");
	if (ms == NULL) {
		RETURN(hipErrorInvalidValue);
	}
	if (list_find(&events, start) < 0 || list_find(&events, stop) < 0 || !start->recorded || !stop->recorded ||
		(start->flags & 2) || (stop->flags & 2)) {
		RETURN(hipErrorInvalidHandle);
	}
	*ms = (float)((stop->at.tv_sec - start->at.tv_sec) * 1e3 + (stop->at.tv_nsec - start->at.tv_nsec) / 1e6);
	RETURN(hipSuccess);
}

// hipStreamWaitEvent: outside a capture everything has run already; an
// event recorded in a capture makes the waiting stream join it, or, waited
// for by the capturing stream, joins the stream it was recorded on back.
hipError_t hipStreamWaitEvent(stream *s, event *e, unsigned int flags) {
	ENTER_INIT("hipStreamWaitEvent");
	if (s == NULL || list_find(&streams, s) < 0 || list_find(&events, e) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (flags != 0) {
		RETURN(hipErrorInvalidValue);
	}
	if (!e->in_capture) {
		RETURN(s->capturing ? hipErrorStreamCaptureUnsupported : hipSuccess);
	}
	if (s == e->origin) {
		if (e->from != s && e->from->origin == s && e->ops == e->from->ops) {
			e->from->joined = 1;
		}
		RETURN(hipSuccess);
	}
	if (!s->capturing) {
		s->capturing = 1;
		s->origin = e->origin;
		s->joined = 0;
	}
	RETURN(hipSuccess);
}

// ---- graphs ----

hipError_t hipStreamBeginCapture(stream *s, int mode) {
	ENTER_INIT("hipStreamBeginCapture");
	if (s == NULL || list_find(&streams, s) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (mode != hipStreamCaptureModeGlobal && mode != hipStreamCaptureModeThreadLocal && mode != hipStreamCaptureModeRelaxed) {
		RETURN(hipErrorInvalidValue);
	}
	if (s->capturing) {
		RETURN(hipErrorIllegalState);
	}
	s->capturing = 1;
	s->invalidated = 0;
	s->origin = NULL;
	s->recs.n = 0;
	RETURN(hipSuccess);
}

// hipStreamEndCapture ends the capture even when it fails (an injected
// failure acts as an invalidated capture): no graph comes back.
hipError_t hipStreamEndCapture(stream *s, graph **g) {
	LOCK();
	hipError_t rc = fail("hipStreamEndCapture");
	if (!initialized) {
		RETURN(hipErrorNotInitialized);
	}
	if (s == NULL || list_find(&streams, s) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (g == NULL || !s->capturing || s->origin != NULL) {
		RETURN(hipErrorInvalidValue);
	}
	s->capturing = 0;
	for (int i = 0; i < streams.n; i++) {
		stream *o = streams.items[i];
		if (o->origin == s) {
			if (!o->joined && rc == hipSuccess) {
				rc = hipErrorStreamCaptureUnjoined;
			}
			o->capturing = 0;
			o->origin = NULL;
		}
	}
	if (s->invalidated && rc == hipSuccess) {
		rc = hipErrorStreamCaptureInvalidated;
	}
	if (rc != hipSuccess) {
		*g = NULL;
		RETURN(rc);
	}
	graph *gr = graph_of(&s->recs);
	list_add(&graphs, gr);
	*g = gr;
	RETURN(hipSuccess);
}

hipError_t hipGraphInstantiateWithFlags(graph **exec, graph *g, unsigned long long flags) {
	ENTER_INIT("hipGraphInstantiateWithFlags");
	if (exec == NULL || list_find(&graphs, g) < 0 || flags != 0) {
		RETURN(hipErrorInvalidValue);
	}
	graph *e = graph_of(&g->recs);
	list_add(&execs, e);
	*exec = e;
	RETURN(hipSuccess);
}

hipError_t hipGraphLaunch(graph *exec, stream *s) {
	ENTER_INIT("hipGraphLaunch");
	if (list_find(&execs, exec) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (s != NULL && list_find(&streams, s) < 0) {
		RETURN(hipErrorInvalidHandle);
	}
	if (s != NULL && s->capturing) {
		RETURN(hipErrorStreamCaptureUnsupported);
	}
	for (int i = 0; i < exec->recs.n; i++) {
		run("replay", &exec->recs.recs[i]);
	}
	RETURN(hipSuccess);
}

hipError_t hipGraphExecDestroy(graph *exec) {
	ENTER_INIT("hipGraphExecDestroy");
	if (!list_remove(&execs, exec)) {
		RETURN(hipErrorInvalidHandle);
	}
	graph_free(exec);
	RETURN(hipSuccess);
}

hipError_t hipGraphDestroy(graph *g) {
	ENTER_INIT("hipGraphDestroy");
	if (!list_remove(&graphs, g)) {
		RETURN(hipErrorInvalidValue);
	}
	graph_free(g);
	RETURN(hipSuccess);
}
