/* The runtime's allocator interface: how a Program makes, describes and views
 * the buffers its kernels read and write.
 *
 * Host memory (NumPy arrays) is the runtime's own allocator, number 0.  A
 * backend whose kernels write elsewhere (device memory) hands the runtime an
 * sg_allocator in a PyCapsule named SG_ALLOCATOR_CAPSULE
 * (runtime.register_allocator), and each of its steps names the allocator of
 * its outputs.  Buffers are Python objects that own their memory; the runtime
 * only keeps them in slots and asks their allocator for an sg_array.
 *
 * Include after Python.h and sg_kernel.h.
 */
#ifndef SG_ALLOCATOR_H
#define SG_ALLOCATOR_H

#define SG_ALLOCATOR_CAPSULE "symgraph.allocator"
#define SG_ALLOCATOR_ABI 2

typedef struct sg_allocator {
    int abi;                /* SG_ALLOCATOR_ABI: the runtime refuses others */
    const char *name;
    void *ctx;              /* handed back to every function */
    /* A new C-contiguous buffer, or NULL with a Python error set. */
    PyObject *(*empty)(void *ctx, int typenum, int ndim, const int64_t *shape);
    /* Fill desc from buffer: 1 when it is one of this allocator's buffers,
     * 0 when it is not, -1 with a Python error set. */
    int (*describe)(void *ctx, PyObject *buffer, sg_array *desc);
    /* 1 when buffer, held by nobody but the program, can hold a new output of
     * this dtype and shape (reused across calls instead of allocated). */
    int (*fits)(void *ctx, PyObject *buffer, int typenum, int ndim, const int64_t *shape);
    /* A buffer viewing base's memory as desc says (desc->data points into
     * base), keeping base alive; NULL with a Python error set. */
    PyObject *(*view)(void *ctx, PyObject *base, const sg_array *desc, int typenum);
    /* Optional (NULL: nothing to do): make this allocator's device the one
     * the calling thread's work goes to, before a step that names it as its
     * context runs (a process may drive several devices; each launch, copy
     * and allocation must happen on the device of the step's arrays).
     * 0, or -1 with a Python error set. */
    int (*enter)(void *ctx);
} sg_allocator;

#endif
