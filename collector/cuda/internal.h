/*
 * What the GPU side's files share (collector/cuda/, built into libcommscope.so): the CUDA runtime
 * functions it calls (found in the program's own runtime, never loaded by commscope), the
 * CUDA-event fallback (events.c) and the common record writer.  Nothing here is exported.
 */
#ifndef COMMSCOPE_CUDA_INTERNAL_H
#define COMMSCOPE_CUDA_INTERNAL_H

#include <stdint.h>

#include "gpu.h"

/* The CUDA runtime subset used (cuda_runtime_api.h, CUDA 11-13); cudaError_t is an int. */
typedef struct CUevent_st *cs__cudaEvent_t;
enum {
    CS__CUDA_SUCCESS = 0,
    CS__CUDA_NOT_READY = 600,
    CS__CUDA_CAPTURE_NONE = 0,
    CS__CUDA_CAPTURE_RELAXED = 2,
    CS__CUDA_STREAM_NON_BLOCKING = 1,
    CS__CUDA_EVENT_DEFAULT = 0,
};
struct cs__cudart {
    int (*GetDevice)(int *);
    int (*DeviceGetPCIBusId)(char *, int, int);
    int (*StreamIsCapturing)(cudaStream_t, int *);
    int (*ThreadExchangeStreamCaptureMode)(int *);
    int (*StreamCreateWithFlags)(cudaStream_t *, unsigned);
    int (*EventCreateWithFlags)(cs__cudaEvent_t *, unsigned);
    int (*EventRecord)(cs__cudaEvent_t, cudaStream_t);
    int (*EventQuery)(cs__cudaEvent_t);
    int (*EventElapsedTime)(float *, cs__cudaEvent_t, cs__cudaEvent_t);
    int (*EventDestroy)(cs__cudaEvent_t);
};
extern struct cs__cudart cs__rt;

/*
 * Find the runtime functions in the CUDA runtime the program already loaded (global scope, else a
 * loaded libcudart.so.13/.12/libcudart.so).  Returns 1 when the runtime was found (functions it
 * lacks stay NULL), 0 otherwise.  Idempotent.
 */
int cs__cudart_load(void);

/* Is stream s being captured into a CUDA graph?  1 yes, 0 no, -1 the runtime could not say
 * (e.g. the legacy stream while another stream captures). */
int cs__cuda_capturing(cudaStream_t s);

/* Write one GPU record on this rank's host clock (times already mapped).  flags: CS_EV_*. */
void cs__gpu_put(uint16_t op, uint64_t start, uint64_t end, uint64_t comm, uint32_t seq,
                 uint64_t bytes, uint64_t brecv, uint64_t launch, uint32_t dev, uint16_t flags);

/* The CUDA-event fallback (events.c).  init: 1 when usable (reason says why CUPTI is not used,
 * for the trace note).  The others as cs__gpu_launch_begin/end and cs__gpu_shutdown. */
int cs__events_init(const char *reason);
uint16_t cs__events_begin(uint64_t launch, cudaStream_t stream);
void cs__events_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                    uint32_t ncalls, ncclResult_t rc);
void cs__events_shutdown(void);

#endif
