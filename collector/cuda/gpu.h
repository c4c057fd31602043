/*
 * The GPU side of the collector (collector/cuda/, built into libcommscope.so): GPU time of NCCL
 * launches and of the program's own kernels, from CUPTI's Activity API when the process uses CUDA,
 * else from CUDA events recorded around each NCCL launch.  CUDA and CUPTI are only ever reached
 * through dlopen/dlsym.
 */
#ifndef COMMSCOPE_CUDA_GPU_H
#define COMMSCOPE_CUDA_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "../nccl/api.h"

/* Decide the timing source once tracing is on (CUPTI, CUDA events or none).  Idempotent. */
void cs__gpu_init(void);
/*
 * An NCCL launch (one call, or one group at its ncclGroupEnd) is about to be made on stream (the
 * group's first call's).  Returns CS_EV_GRAPH when the stream is being captured into a CUDA
 * graph (the launch is then not timed), else 0.
 */
uint16_t cs__gpu_launch_begin(uint64_t launch, cudaStream_t stream);
/* CS_EV_GRAPH when stream is being captured into a CUDA graph (calls inside a group), else 0. */
uint16_t cs__gpu_stream_flags(cudaStream_t stream);
/*
 * The launch returned rc.  comm/seq: the launching (first) collective's communicator id and
 * sequence number; ncalls: NCCL calls in the launch; stream: the (first) call's stream.
 */
void cs__gpu_launch_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                        uint32_t ncalls, ncclResult_t rc);
/* Flush every pending GPU record into the trace and stop (at exit / before the trace closes). */
void cs__gpu_shutdown(void);
/* PCI bus id of CUDA device dev into out ("" when unknown). */
void cs__gpu_bus_id(int dev, char *out, size_t cap);

#endif
