/* Device memory: the DeviceArray type, a caching allocator, and the runtime's
 * sg_allocator for them (c_src/sg_allocator.h).
 *
 * One source for both devices.  nvcc builds it against the CUDA runtime for a
 * GPU; under gpu.emulate the host C++ compiler builds it with sg_cuda_emu.h
 * included first, where cudaMalloc is malloc and cudaMemcpy memcpy, so the
 * emulated device runs this very allocator, its cache and its copies.
 *
 * A DeviceArray describes device memory (pointer, dtype, shape, byte strides)
 * and either owns a block of the cache or keeps its base array alive (a
 * view).  Its data never reaches NumPy directly: get() and __array__ copy to
 * a new host array, so no host code ever dereferences a device pointer.
 *
 * The cache keeps freed blocks and hands them out again (best fit within
 * twice the request), so a training loop stops calling cudaMalloc after its
 * first step; when cudaMalloc fails, the cache is released and the call
 * retried once before the MemoryError.  The GIL is held by every caller
 * (the runtime's allocator calls and Python), which serializes the cache.
 *
 * Several devices (the flag contexts): each device the process uses has its
 * own cache, counters, cuBLAS table and sg_allocator (whose enter selects
 * the device before a step of it runs), and every array records its device.
 * Work on another device's memory (a free, a copy back, a peer copy) selects
 * that device for a moment and the caller's again afterwards.
 *
 * Loaded with ctypes.PyDLL (no extension module): sg_cuda_memory_init selects
 * a device, imports NumPy's C API and makes the type (one for every device).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sg_kernel.h"
#include "sg_allocator.h"
#include "cuda/sg_cuda_launch.h"
#include "cuda/copy.inc"
#include "cuda/sg_cublas_api.h"
#ifndef SG_CUDA_EMULATED
#include <dlfcn.h>
#endif

#define SG_EXPORT extern "C" __attribute__((visibility("default")))

#if NPY_ABI_VERSION >= 0x02000000
#define SG_DESCR_ELSIZE(d) PyDataType_ELSIZE(d)
#else
#define SG_DESCR_ELSIZE(d) ((d)->elsize)
#endif

/* -- the devices and their caches ------------------------------------------------------ */

/* A process may drive several devices (the flag contexts): each has its own
 * cache, counters, cuBLAS handle and runtime allocator, and every array
 * records the device its memory is on. */
#define SG_CUDA_MAX_DEVICES 16

typedef struct sg_block {
    void *ptr;
    size_t size;
    struct sg_block *next;
} sg_block;

typedef struct sg_device {
    int index;                     /* the CUDA device number */
    int ready;                     /* selected once (sg_cuda_memory_init) */
    sg_block *cache_free;          /* blocks returned, ready for reuse */
    size_t bytes_in_use, bytes_cached;
    long long device_mallocs, device_frees;
    int cache_enabled;             /* gpuarray.preallocate=-1: every free goes to the device */
    sg_cublas_table blas;          /* a cuBLAS handle and its constants live on one device */
    int blas_state;                /* 0 not tried, 1 ready, -1 unavailable */
    unsigned int peers;            /* bit p: this device reads device p's memory directly */
    sg_allocator allocator;        /* the runtime's allocator of this device's arrays */
} sg_device;

static sg_device devices[SG_CUDA_MAX_DEVICES];

/* The device the calling thread's CUDA calls go to now (cudaSetDevice is per
 * thread).  symgraph assumes it owns the thread's current device between its
 * own calls: a library that changes it must set it back. */
static thread_local sg_device *current;

static sg_device *device_of(int index) {
    if (index < 0 || index >= SG_CUDA_MAX_DEVICES || !devices[index].ready) {
        PyErr_Format(PyExc_ValueError, "CUDA device %d is not in use by this process "
                     "(sg_cuda_memory_init)", index);
        return NULL;
    }
    return &devices[index];
}

static void blas_show(sg_device *d);

/* Make `d` the calling thread's device; 0, or -1 with a Python error set. */
static int select_device(sg_device *d) {
    if (current == d) return 0;
    cudaError_t rc = cudaSetDevice(d->index);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        PyErr_Format(PyExc_RuntimeError, "cannot use CUDA device %d: %s", d->index,
                     cudaGetErrorString(rc));
        return -1;
    }
    current = d;
    blas_show(d);
    return 0;
}

/* select_device for a moment: *saved gets the device to go back to
 * (restore_device), so that freeing or copying another device's memory never
 * leaves a step's kernels launching on the wrong device. */
static int borrow_device(sg_device *d, sg_device **saved) {
    *saved = current;
    return select_device(d);
}

static void restore_device(sg_device *saved) {
    if (saved != NULL && saved != current && select_device(saved) < 0) PyErr_Clear();
}

static size_t round_up(size_t n) { return n == 0 ? 512 : (n + 511) / 512 * 512; }

/* The caller has selected d. */
static void release_cache_on(sg_device *d) {
    while (d->cache_free != NULL) {
        sg_block *b = d->cache_free;
        d->cache_free = b->next;
        cudaFree(b->ptr);
        d->device_frees++;
        d->bytes_cached -= b->size;
        free(b);
    }
}

static void release_cache(sg_device *d) {
    sg_device *saved;
    if (borrow_device(d, &saved) < 0) { PyErr_Clear(); return; }
    release_cache_on(d);
    restore_device(saved);
}

/* A block of at least n bytes of d (*got: its size), or NULL (the device is
 * full).  The caller has selected d. */
static void *cache_take(sg_device *d, size_t n, size_t *got) {
    const size_t want = round_up(n);
    sg_block **best = NULL;
    for (sg_block **p = &d->cache_free; *p != NULL; p = &(*p)->next)
        if ((*p)->size >= want && (*p)->size <= 2 * want &&
            (best == NULL || (*p)->size < (*best)->size))
            best = p;
    if (best != NULL) {
        sg_block *b = *best;
        void *ptr = b->ptr;
        *got = b->size;
        *best = b->next;
        d->bytes_cached -= b->size;
        d->bytes_in_use += b->size;
        free(b);
        return ptr;
    }
    void *ptr = NULL;
    cudaError_t rc = cudaMalloc(&ptr, want);
    if (rc != cudaSuccess) {
        cudaGetLastError();            /* clear it: the device stays usable */
        release_cache_on(d);
        rc = cudaMalloc(&ptr, want);
    }
    if (rc != cudaSuccess || ptr == NULL) {
        cudaGetLastError();
        return NULL;
    }
    d->device_mallocs++;
    d->bytes_in_use += want;
    *got = want;
    return ptr;
}

/* cache_take on d (selected here), or NULL with a MemoryError set. */
static void *cache_alloc(sg_device *d, size_t n, size_t *got) {
    sg_device *saved;
    if (borrow_device(d, &saved) < 0) return NULL;
    void *ptr = cache_take(d, n, got);
    restore_device(saved);
    if (ptr == NULL)
        PyErr_Format(PyExc_MemoryError, "out of device memory on cuda%d: %zu bytes requested, "
                     "%zu bytes in use by symgraph", d->index, round_up(n), d->bytes_in_use);
    return ptr;
}

static void cache_release(sg_device *d, void *ptr, size_t size) {
    d->bytes_in_use -= size;
    sg_block *b = d->cache_enabled ? (sg_block *)malloc(sizeof *b) : NULL;
    if (b == NULL) {                   /* no cache, or no host memory to remember it */
        sg_device *saved;
        if (borrow_device(d, &saved) < 0) PyErr_Clear();
        cudaFree(ptr);
        restore_device(saved);
        d->device_frees++;
        return;
    }
    b->ptr = ptr;
    b->size = size;
    b->next = d->cache_free;
    d->cache_free = b;
    d->bytes_cached += size;
}

/* -- DeviceArray ---------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    char *data;
    int ndim, typenum;
    int64_t shape[SG_MAXDIMS], strides[SG_MAXDIMS];
    PyObject *base;                    /* the array owning the memory; NULL: this one */
    sg_device *dev;                    /* the device the memory is on */
    void *block;
    size_t block_size;
} DevArray;

static PyTypeObject *dev_type;

static int64_t dev_itemsize(int typenum) {
    PyArray_Descr *d = PyArray_DescrFromType(typenum);
    if (d == NULL) return -1;
    const int64_t size = (int64_t)SG_DESCR_ELSIZE(d);
    Py_DECREF(d);
    return size;
}

static int64_t dev_size(const DevArray *a) {
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
    return n;
}

static int dev_contiguous(const DevArray *a, int64_t item) {
    int64_t expect = item;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] != 1 && a->strides[d] != expect) return 0;
        expect *= a->shape[d];
    }
    return 1;
}

static DevArray *dev_alloc(sg_device *dev, int typenum, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > SG_MAXDIMS) {
        PyErr_Format(PyExc_ValueError, "a device array has at most %d dimensions, not %d",
                     SG_MAXDIMS, ndim);
        return NULL;
    }
    const int64_t item = dev_itemsize(typenum);
    if (item < 0) return NULL;
    DevArray *a = (DevArray *)dev_type->tp_alloc(dev_type, 0);
    if (a == NULL) return NULL;
    a->ndim = ndim;
    a->typenum = typenum;
    a->dev = dev;
    int64_t n = item;
    for (int d = ndim - 1; d >= 0; d--) {
        a->shape[d] = shape[d];
        a->strides[d] = n;
        n *= shape[d] > 0 ? shape[d] : 1;
    }
    int64_t total = item;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    a->block = cache_alloc(dev, (size_t)total, &a->block_size);
    if (a->block == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    a->data = (char *)a->block;
    return a;
}

static void dev_dealloc(PyObject *self) {
    DevArray *a = (DevArray *)self;
    if (a->base != NULL) Py_DECREF(a->base);
    else if (a->block != NULL) cache_release(a->dev, a->block, a->block_size);
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* A new host ndarray holding a copy of the device array's elements. */
static PyObject *dev_to_host(DevArray *a) {
    npy_intp dims[SG_MAXDIMS];
    for (int d = 0; d < a->ndim; d++) dims[d] = (npy_intp)a->shape[d];
    PyArrayObject *host = (PyArrayObject *)PyArray_SimpleNew(a->ndim, dims, a->typenum);
    if (host == NULL) return NULL;
    const int64_t item = dev_itemsize(a->typenum), n = dev_size(a);
    if (n == 0) return (PyObject *)host;
    const char *src = a->data;
    void *tmp = NULL;
    size_t tmp_size = 0;
    sg_device *saved;
    if (borrow_device(a->dev, &saved) < 0) { Py_DECREF(host); return NULL; }
    if (!dev_contiguous(a, item)) {
        /* gather on the device first: one copy back instead of one per element */
        tmp = cache_alloc(a->dev, (size_t)(n * item), &tmp_size);
        if (tmp == NULL) { restore_device(saved); Py_DECREF(host); return NULL; }
        sg_array s, t;
        s.data = a->data; s.ndim = a->ndim;
        memcpy(s.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
        memcpy(s.strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
        t = s;
        t.data = (char *)tmp;
        sg_error err;
        err.kind = 0;
        if (sg_cu_copy_flat(&t, &s, item, &err)) {
            cache_release(a->dev, tmp, tmp_size);
            restore_device(saved);
            Py_DECREF(host);
            PyErr_SetString(PyExc_RuntimeError, err.msg);
            return NULL;
        }
        src = (const char *)tmp;
    }
    cudaError_t rc = cudaMemcpy(PyArray_DATA(host), src, (size_t)(n * item),
                                cudaMemcpyDeviceToHost);
    if (tmp != NULL) cache_release(a->dev, tmp, tmp_size);
    restore_device(saved);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        Py_DECREF(host);
        PyErr_Format(PyExc_RuntimeError, "copying a device array to the host failed: %s",
                     cudaGetErrorString(rc));
        return NULL;
    }
    return (PyObject *)host;
}

static PyObject *dev_get(PyObject *self, PyObject *unused) {
    (void)unused;
    return dev_to_host((DevArray *)self);
}

/* A new contiguous device array holding a copy of a's elements (on the device). */
static PyObject *dev_copy_of(DevArray *a) {
    DevArray *c = dev_alloc(a->dev, a->typenum, a->ndim, a->shape);
    if (c == NULL) return NULL;
    const int64_t item = dev_itemsize(a->typenum), n = dev_size(a);
    if (n == 0) return (PyObject *)c;
    sg_device *saved;
    if (borrow_device(a->dev, &saved) < 0) { Py_DECREF(c); return NULL; }
    if (dev_contiguous(a, item)) {
        cudaError_t rc = cudaMemcpy(c->data, a->data, (size_t)(n * item),
                                    cudaMemcpyDeviceToDevice);
        restore_device(saved);
        if (rc != cudaSuccess) {
            cudaGetLastError();
            Py_DECREF(c);
            PyErr_Format(PyExc_RuntimeError, "copying %lld bytes on the device failed: %s",
                         (long long)(n * item), cudaGetErrorString(rc));
            return NULL;
        }
        return (PyObject *)c;
    }
    sg_array s, t;
    s.data = a->data; s.ndim = a->ndim;
    memcpy(s.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    memcpy(s.strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
    t = s;
    t.data = c->data;
    sg_error err;
    err.kind = 0;
    const int failed = sg_cu_copy_flat(&t, &s, item, &err);
    restore_device(saved);
    if (failed) {
        Py_DECREF(c);
        PyErr_SetString(PyExc_RuntimeError, err.msg);
        return NULL;
    }
    return (PyObject *)c;
}

static PyObject *dev_copy(PyObject *self, PyObject *unused) {
    (void)unused;
    return dev_copy_of((DevArray *)self);
}

static PyObject *dev_deepcopy(PyObject *self, PyObject *memo) {
    (void)memo;
    return dev_copy_of((DevArray *)self);
}

static PyObject *dev_array(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *dtype = Py_None, *copy = Py_None;
    static const char *names[] = {"dtype", "copy", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO", (char **)names, &dtype, &copy))
        return NULL;
    PyObject *host = dev_to_host((DevArray *)self);
    if (host == NULL || dtype == Py_None) return host;
    PyObject *cast = PyObject_CallMethod(host, "astype", "O", dtype);
    Py_DECREF(host);
    return cast;
}

static PyObject *dev_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    /* pickled as its host copy, put back on the same kind of device (a GPU or
     * the emulated one), and the same device number, when loaded */
    PyObject *module = PyImport_ImportModule("symgraph.backends.cuda.device_memory");
    if (module == NULL) return NULL;
    PyObject *rebuild = PyObject_GetAttrString(module, "from_host");
    Py_DECREF(module);
    if (rebuild == NULL) return NULL;
    PyObject *host = dev_to_host((DevArray *)self);
    if (host == NULL) { Py_DECREF(rebuild); return NULL; }
#ifdef SG_CUDA_EMULATED
    PyObject *emulated = Py_True;
#else
    PyObject *emulated = Py_False;
#endif
    return Py_BuildValue("(N(NOi))", rebuild, host, emulated, ((DevArray *)self)->dev->index);
}

static PyObject *dev_repr(PyObject *self) {
    PyObject *host = dev_to_host((DevArray *)self);
    if (host == NULL) return NULL;
    PyObject *text = PyUnicode_FromFormat("DeviceArray(%R)", host);
    Py_DECREF(host);
    return text;
}

static PyObject *dev_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    for (int d = 0; t != NULL && d < n; d++) PyTuple_SET_ITEM(t, d, PyLong_FromLongLong(v[d]));
    return t;
}

static PyObject *dev_shape(PyObject *self, void *c) {
    (void)c;
    return dev_tuple(((DevArray *)self)->shape, ((DevArray *)self)->ndim);
}
static PyObject *dev_strides(PyObject *self, void *c) {
    (void)c;
    return dev_tuple(((DevArray *)self)->strides, ((DevArray *)self)->ndim);
}
static PyObject *dev_ndim(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(((DevArray *)self)->ndim);
}
static PyObject *dev_dtype(PyObject *self, void *c) {
    (void)c;
    return (PyObject *)PyArray_DescrFromType(((DevArray *)self)->typenum);
}
static PyObject *dev_size_get(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLongLong(dev_size((DevArray *)self));
}
static PyObject *dev_nbytes(PyObject *self, void *c) {
    (void)c;
    const DevArray *a = (DevArray *)self;
    return PyLong_FromLongLong(dev_size(a) * dev_itemsize(a->typenum));
}
static PyObject *dev_ptr(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromVoidPtr(((DevArray *)self)->data);
}
static PyObject *dev_device(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(((DevArray *)self)->dev->index);
}
static PyObject *dev_base(PyObject *self, void *c) {
    (void)c;
    PyObject *base = ((DevArray *)self)->base;
    if (base == NULL) base = Py_None;
    Py_INCREF(base);
    return base;
}

/* CUDA's array interface (version 3), so CuPy, PyTorch, Numba and PyCUDA
 * read the array in place.  "stream" 1 is the legacy default stream, where
 * symgraph's kernels run: a consumer on another stream waits for it. */
static PyObject *dev_interface(PyObject *self, void *c) {
    (void)c;
    const DevArray *a = (DevArray *)self;
    PyArray_Descr *d = PyArray_DescrFromType(a->typenum);
    if (d == NULL) return NULL;
    PyObject *typestr = PyObject_GetAttrString((PyObject *)d, "str");
    Py_DECREF(d);
    if (typestr == NULL) return NULL;
    PyObject *strides;
    if (dev_contiguous(a, dev_itemsize(a->typenum))) {
        strides = Py_None;
        Py_INCREF(strides);
    } else {
        strides = dev_tuple(a->strides, a->ndim);
    }
    /* an empty array's address is 0 by the protocol's rule */
    void *data = dev_size(a) == 0 ? NULL : a->data;
    return Py_BuildValue("{s:N,s:N,s:(NO),s:N,s:i,s:i}", "shape", dev_tuple(a->shape, a->ndim),
                         "typestr", typestr, "data", PyLong_FromVoidPtr(data), Py_False,
                         "strides", strides, "version", 3, "stream", 1);
}

static PyGetSetDef dev_getset[] = {
    {"shape", dev_shape, NULL, "The shape (a tuple of ints).", NULL},
    {"strides", dev_strides, NULL, "The strides in bytes (a tuple of ints).", NULL},
    {"ndim", dev_ndim, NULL, "The number of dimensions.", NULL},
    {"dtype", dev_dtype, NULL, "The element type (a numpy.dtype).", NULL},
    {"size", dev_size_get, NULL, "The number of elements.", NULL},
    {"nbytes", dev_nbytes, NULL, "The bytes the elements take.", NULL},
    {"ptr", dev_ptr, NULL, "The device address of the first element (an int).", NULL},
    {"base", dev_base, NULL, "The array whose memory this one views, or None.", NULL},
    {"device", dev_device, NULL, "The number of the CUDA device its memory is on (an int).",
     NULL},
    {"__cuda_array_interface__", dev_interface, NULL,
     "CUDA's array interface (version 3): other GPU libraries use the array in place.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dev_methods[] = {
    {"get", dev_get, METH_NOARGS, "A host copy: a new numpy.ndarray."},
    {"__array__", (PyCFunction)(void (*)(void))dev_array, METH_VARARGS | METH_KEYWORDS,
     "numpy.asarray(device_array): a host copy."},
    {"__reduce__", dev_reduce, METH_NOARGS, "Pickled as its host copy."},
    {"copy", dev_copy, METH_NOARGS, "A new contiguous device array with the same elements "
     "(copied on the device)."},
    {"__copy__", dev_copy, METH_NOARGS, "copy.copy(a): a device copy."},
    {"__deepcopy__", dev_deepcopy, METH_O, "copy.deepcopy(a): a device copy."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot dev_slots[] = {
    {Py_tp_dealloc, (void *)dev_dealloc},
    {Py_tp_repr, (void *)dev_repr},
    {Py_tp_getset, (void *)dev_getset},
    {Py_tp_methods, (void *)dev_methods},
    {Py_tp_doc, (void *)"An array in device memory (symgraph's CUDA backend). Its elements "
                        "reach the host only through get() or numpy.asarray, which copy."},
    {0, NULL},
};

static PyType_Spec dev_spec = {
    "symgraph.gpu.DeviceArray", sizeof(DevArray), 0, Py_TPFLAGS_DEFAULT, dev_slots,
};

/* -- the runtime's allocators: one per device, ctx is its sg_device ------------------- */

static PyObject *mem_empty(void *ctx, int typenum, int ndim, const int64_t *shape) {
    return (PyObject *)dev_alloc((sg_device *)ctx, typenum, ndim, shape);
}

/* Any device's array: describing memory needs no device (the step that reads
 * it was placed on the device of its inputs). */
static int mem_describe(void *ctx, PyObject *v, sg_array *d) {
    (void)ctx;
    if (Py_TYPE(v) != dev_type) return 0;
    const DevArray *a = (DevArray *)v;
    d->data = a->data;
    d->ndim = a->ndim;
    memcpy(d->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    memcpy(d->strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
    return 1;
}

static int mem_fits(void *ctx, PyObject *old, int typenum, int ndim, const int64_t *shape) {
    if (Py_TYPE(old) != dev_type) return 0;
    const DevArray *a = (DevArray *)old;
    if (a->dev != (sg_device *)ctx || a->typenum != typenum || a->ndim != ndim ||
        a->base != NULL || !dev_contiguous(a, dev_itemsize(typenum)))
        return 0;
    for (int d = 0; d < ndim; d++)
        if (a->shape[d] != shape[d]) return 0;
    return 1;
}

static PyObject *mem_view(void *ctx, PyObject *base, const sg_array *d, int typenum) {
    (void)ctx;
    if (Py_TYPE(base) != dev_type) {
        PyErr_SetString(PyExc_TypeError, "a device view's base is not a device array");
        return NULL;
    }
    DevArray *v = (DevArray *)dev_type->tp_alloc(dev_type, 0);
    if (v == NULL) return NULL;
    v->data = d->data;
    v->ndim = d->ndim;
    v->typenum = typenum;
    v->dev = ((DevArray *)base)->dev;
    memcpy(v->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim);
    memcpy(v->strides, d->strides, sizeof(int64_t) * (size_t)d->ndim);
    Py_INCREF(base);
    v->base = base;
    return (PyObject *)v;
}

static int mem_enter(void *ctx) { return select_device((sg_device *)ctx); }

/* Let `from` read `to`'s memory directly where the hardware allows (NVLink,
 * PCIe peer to peer), so that copies between them skip the host; elsewhere
 * cudaMemcpyPeer stages them through the host by itself.  Best effort: a
 * refusal leaves the copies correct, only slower. */
static void enable_peer_access(sg_device *from, sg_device *to) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from->index, to->index) != cudaSuccess || !can) {
        cudaGetLastError();
        return;
    }
    sg_device *saved;
    if (borrow_device(from, &saved) < 0) { PyErr_Clear(); return; }
    cudaError_t rc = cudaDeviceEnablePeerAccess(to->index, 0);
    cudaGetLastError();                /* "already enabled" is no failure */
    restore_device(saved);
    if (rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled)
        from->peers |= 1u << to->index;
}

/* 1 when device `device` reads device `peer`'s memory directly (peer access
 * is on), 0 when copies between them go through the host. */
SG_EXPORT int sg_cuda_peer_access(int device, int peer) {
    if (device < 0 || device >= SG_CUDA_MAX_DEVICES || peer < 0 || peer >= SG_CUDA_MAX_DEVICES)
        return 0;
    return (devices[device].peers >> peer) & 1u;
}

/* -- what Python calls ---------------------------------------------------------------- */

/* Select device `device` (its flags set on first use) and make the type; the
 * type (a new reference), or NULL with a Python error set.  Called once per
 * device the process uses. */
SG_EXPORT PyObject *sg_cuda_memory_init(int device, int schedule) {
    if (PyArray_API == NULL) {
        import_array1(NULL);
    }
    if (device < 0 || device >= SG_CUDA_MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "CUDA device %d: symgraph drives devices 0 to %d",
                     device, SG_CUDA_MAX_DEVICES - 1);
        return NULL;
    }
    sg_device *d = &devices[device];
    if (!d->ready) {
        d->index = device;
        d->cache_enabled = 1;
        sg_device *saved = current;
        current = NULL;                /* force the cudaSetDevice of a first use */
        if (select_device(d) < 0) { current = saved; return NULL; }
        if (schedule >= 0) {
            cudaError_t rc = cudaSetDeviceFlags((unsigned int)schedule);
            if (rc != cudaSuccess) {
                cudaGetLastError();
                restore_device(saved);
                PyErr_Format(PyExc_RuntimeError, "cannot set how the host waits for CUDA "
                             "device %d (gpuarray.sched): %s", device, cudaGetErrorString(rc));
                return NULL;
            }
        }
        d->allocator = sg_allocator{SG_ALLOCATOR_ABI, "cuda", d, mem_empty, mem_describe,
                                    mem_fits, mem_view, mem_enter};
        d->ready = 1;
        for (int other = 0; other < SG_CUDA_MAX_DEVICES; other++)
            if (other != device && devices[other].ready) {
                enable_peer_access(d, &devices[other]);
                enable_peer_access(&devices[other], d);
            }
        /* the first device stays current (one-device processes never switch) */
        if (saved != NULL) restore_device(saved);
    }
    if (dev_type == NULL) {
        dev_type = (PyTypeObject *)PyType_FromSpec(&dev_spec);
        if (dev_type == NULL) return NULL;
    }
    Py_INCREF(dev_type);
    return (PyObject *)dev_type;
}

/* The runtime allocator of device `device` (in use), for a PyCapsule; NULL
 * with a Python error set. */
SG_EXPORT sg_allocator *sg_cuda_allocator_of(int device) {
    sg_device *d = device_of(device);
    return d == NULL ? NULL : &d->allocator;
}

/* A device copy on device `device` of the C-contiguous, aligned ndarray `host`. */
SG_EXPORT PyObject *sg_cuda_put(PyObject *host, int device) {
    if (!PyArray_Check(host) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host) ||
        !PyArray_ISALIGNED((PyArrayObject *)host)) {
        PyErr_SetString(PyExc_TypeError, "sg_cuda_put wants a C-contiguous aligned ndarray");
        return NULL;
    }
    sg_device *dev = device_of(device);
    if (dev == NULL) return NULL;
    PyArrayObject *h = (PyArrayObject *)host;
    int64_t shape[SG_MAXDIMS];
    for (int d = 0; d < PyArray_NDIM(h); d++) shape[d] = PyArray_DIMS(h)[d];
    DevArray *a = dev_alloc(dev, PyArray_TYPE(h), PyArray_NDIM(h), shape);
    if (a == NULL) return NULL;
    const size_t n = (size_t)PyArray_NBYTES(h);
    if (n > 0) {
        sg_device *saved;
        if (borrow_device(dev, &saved) < 0) { Py_DECREF(a); return NULL; }
        cudaError_t rc = cudaMemcpy(a->data, PyArray_DATA(h), n, cudaMemcpyHostToDevice);
        restore_device(saved);
        if (rc != cudaSuccess) {
            cudaGetLastError();
            Py_DECREF(a);
            PyErr_Format(PyExc_RuntimeError, "copying %zu bytes to cuda%d failed: %s", n,
                         device, cudaGetErrorString(rc));
            return NULL;
        }
    }
    return (PyObject *)a;
}

/* Copy the elements of `src` (any strides, on device src_dev) into `dst`
 * (contiguous, same shape, on device dst_dev): a strided source is gathered
 * on its own device first, then one cudaMemcpyPeer moves the bytes (over the
 * devices' link where peer access is on, through the host where it is not:
 * the driver chooses).  The caller's device is selected again afterwards.
 * 0, or 1 with err set.  No Python error: the runtime's kernels call it. */
#define SG_SET_ERROR(err, k, ...) \
    do { (err)->kind = (k); snprintf((err)->msg, sizeof((err)->msg), __VA_ARGS__); } while (0)

static int peer_copy(const sg_array *dst, sg_device *dst_dev, const sg_array *src,
                     sg_device *src_dev, int64_t item, sg_error *err) {
    const int64_t n = sg_size(src);
    if (n == 0) return 0;
    sg_device *saved = current;
    const char *from = src->data;
    void *tmp = NULL;
    size_t tmp_size = 0;
    if (!sg_is_c_contiguous(src, item)) {
        if (select_device(src_dev) < 0) {
            PyErr_Clear();
            SG_SET_ERROR(err, SG_ERR_RUNTIME, "cannot select cuda%d", src_dev->index);
            return 1;
        }
        tmp = cache_take(src_dev, (size_t)(n * item), &tmp_size);
        if (tmp == NULL) {
            restore_device(saved);
            SG_SET_ERROR(err, SG_ERR_MEMORY, "out of device memory on cuda%d: %lld bytes to "
                         "gather an array before copying it to cuda%d", src_dev->index,
                         (long long)(n * item), dst_dev->index);
            return 1;
        }
        sg_array t = *src;
        t.data = (char *)tmp;
        if (sg_cu_copy_flat(&t, src, item, err)) {
            cache_release(src_dev, tmp, tmp_size);
            restore_device(saved);
            return 1;
        }
        from = (const char *)tmp;
    }
    cudaError_t rc = dst_dev == src_dev
        ? cudaMemcpy(dst->data, from, (size_t)(n * item), cudaMemcpyDeviceToDevice)
        : cudaMemcpyPeer(dst->data, dst_dev->index, from, src_dev->index, (size_t)(n * item));
    if (tmp != NULL) cache_release(src_dev, tmp, tmp_size);
    restore_device(saved);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        SG_SET_ERROR(err, SG_ERR_RUNTIME, "copying %lld bytes from cuda%d to cuda%d failed: %s",
                     (long long)(n * item), src_dev->index, dst_dev->index,
                     cudaGetErrorString(rc));
        return 1;
    }
    return 0;
}

/* What a GpuToGpu kernel calls (through CKernel.symbols): `src` on device
 * src_device copied into `dst` on dst_device.  0, or 1 with err set. */
SG_EXPORT int sg_cuda_peer_copy(const sg_array *dst, int dst_device, const sg_array *src,
                                int src_device, int64_t itemsize, sg_error *err) {
    if (dst_device < 0 || dst_device >= SG_CUDA_MAX_DEVICES || !devices[dst_device].ready ||
        src_device < 0 || src_device >= SG_CUDA_MAX_DEVICES || !devices[src_device].ready) {
        SG_SET_ERROR(err, SG_ERR_RUNTIME, "a copy between cuda%d and cuda%d, a device this "
                     "process does not use", src_device, dst_device);
        return 1;
    }
    return peer_copy(dst, &devices[dst_device], src, &devices[src_device], itemsize, err);
}

/* A new contiguous array on device `device` holding a copy of `array` (a
 * DeviceArray of any device): how set_value and transfers move values
 * between devices outside compiled functions. */
SG_EXPORT PyObject *sg_cuda_copy_to(PyObject *array, int device) {
    if (Py_TYPE(array) != dev_type) {
        PyErr_SetString(PyExc_TypeError, "sg_cuda_copy_to wants a DeviceArray");
        return NULL;
    }
    sg_device *dev = device_of(device);
    if (dev == NULL) return NULL;
    DevArray *a = (DevArray *)array;
    if (a->dev == dev) return dev_copy_of(a);
    DevArray *c = dev_alloc(dev, a->typenum, a->ndim, a->shape);
    if (c == NULL) return NULL;
    sg_array s, t;
    s.data = a->data; s.ndim = a->ndim;
    memcpy(s.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    memcpy(s.strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
    t = s;
    t.data = c->data;
    memcpy(t.strides, c->strides, sizeof(int64_t) * (size_t)c->ndim);
    sg_error err;
    err.kind = 0;
    err.msg[0] = 0;
    if (peer_copy(&t, dev, &s, a->dev, dev_itemsize(a->typenum), &err)) {
        Py_DECREF(c);
        PyErr_SetString(err.kind == SG_ERR_MEMORY ? PyExc_MemoryError : PyExc_RuntimeError,
                        err.msg);
        return NULL;
    }
    return (PyObject *)c;
}

/* A DeviceArray over device memory that another library owns (described by
 * its __cuda_array_interface__): no copy; `owner` is kept alive as the
 * array's base.  `shape` and `strides` (bytes) are tuples of ints; the
 * caller has checked them against the memory's alignment. */
SG_EXPORT PyObject *sg_cuda_wrap(PyObject *owner, PyObject *ptr, PyObject *dtype,
                                 PyObject *shape, PyObject *strides, int device) {
    sg_device *dev = device_of(device);
    if (dev == NULL) return NULL;
    PyArray_Descr *descr = NULL;
    if (!PyArray_DescrConverter(dtype, &descr)) return NULL;
    const int typenum = descr->type_num;
    Py_DECREF(descr);
    const Py_ssize_t ndim = PyTuple_Size(shape);
    if (ndim < 0) return NULL;
    if (ndim > SG_MAXDIMS || PyTuple_Size(strides) != ndim) {
        PyErr_Format(PyExc_ValueError, "a device array has at most %d dimensions and one "
                     "stride per dimension", SG_MAXDIMS);
        return NULL;
    }
    void *data = PyLong_AsVoidPtr(ptr);
    if (data == NULL && PyErr_Occurred()) return NULL;
    DevArray *a = (DevArray *)dev_type->tp_alloc(dev_type, 0);
    if (a == NULL) return NULL;
    a->data = (char *)data;
    a->ndim = (int)ndim;
    a->typenum = typenum;
    a->dev = dev;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        a->shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        a->strides[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
    }
    if (PyErr_Occurred()) { Py_DECREF(a); return NULL; }
    Py_INCREF(owner);
    a->base = owner;
    return (PyObject *)a;
}

/* Wait for the work queued on another library's stream (a handle from its
 * __cuda_array_interface__) before symgraph reads the memory on its own. */
SG_EXPORT int sg_cuda_stream_wait(uintptr_t stream) {
    cudaError_t rc = cudaStreamSynchronize((cudaStream_t)stream);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        PyErr_Format(PyExc_RuntimeError, "waiting for the stream of a foreign device array "
                     "failed: %s", cudaGetErrorString(rc));
        return -1;
    }
    return 0;
}

/* gpuarray.preallocate on device `device`: `enabled` 0 turns its cache off
 * (freed blocks go back to the device at once); `reserve` > 0 takes that many
 * bytes from the device now and keeps them in the cache.  0, or -1 with a
 * Python error. */
SG_EXPORT int sg_cuda_configure_cache(int device, int enabled, size_t reserve) {
    sg_device *d = device_of(device);
    if (d == NULL) return -1;
    d->cache_enabled = enabled;
    if (!enabled) release_cache(d);
    if (reserve == 0 || !enabled) return 0;
    size_t got = 0;
    void *block = cache_alloc(d, reserve, &got);
    if (block == NULL) return -1;
    cache_release(d, block, got);
    return 0;
}

/* The memory of device `device` in bytes (the host's, on the emulated device). */
SG_EXPORT size_t sg_cuda_total_memory(int device) {
    sg_device *d = device_of(device), *saved;
    if (d == NULL) { PyErr_Clear(); return 0; }
    if (borrow_device(d, &saved) < 0) { PyErr_Clear(); return 0; }
    size_t free_bytes = 0, total = 0;
    cudaError_t rc = cudaMemGetInfo(&free_bytes, &total);
    restore_device(saved);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return total;
}

/* The name of device `device`, as its driver reports it. */
SG_EXPORT PyObject *sg_cuda_device_name(int device) {
#ifdef SG_CUDA_EMULATED
    return PyUnicode_FromFormat("the emulated device, number %d (CUDA run on the CPU)", device);
#else
    cudaDeviceProp prop;
    cudaError_t rc = cudaGetDeviceProperties(&prop, device);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        return PyUnicode_FromString("a CUDA device");
    }
    return PyUnicode_FromString(prop.name);
#endif
}

/* The counters of device `device`'s cache: a dict. */
SG_EXPORT PyObject *sg_cuda_memory_stats(int device) {
    sg_device *d = device_of(device);
    if (d == NULL) return NULL;
    return Py_BuildValue("{s:n,s:n,s:L,s:L}", "bytes_in_use", (Py_ssize_t)d->bytes_in_use,
                         "bytes_cached", (Py_ssize_t)d->bytes_cached, "device_mallocs",
                         d->device_mallocs, "device_frees", d->device_frees);
}

/* Scratch memory for kernels (index vectors, packed copies): a block of the
 * cache of the current device (the step's, selected by its allocator's
 * enter), or NULL when the device is full (no Python error: kernels report
 * through sg_error).  The runtime holds the GIL while kernels run, which
 * serializes these with the allocator's other calls. */
SG_EXPORT void *sg_cuda_scratch_get(size_t n, size_t *got) {
    return current == NULL ? NULL : cache_take(current, n, got);
}
SG_EXPORT void sg_cuda_scratch_put(void *ptr, size_t size) {
    if (ptr != NULL && current != NULL) cache_release(current, ptr, size);
}

/* -- cuBLAS ------------------------------------------------------------------------------ */

/* The table the kernels hold (sg_cu_blas, set once per library): it shows
 * the current device's handle and constants, copied in by select_device, so
 * a kernel's product runs on its step's device. */
static sg_cublas_table shown_blas;
static int blas_wanted;                /* a kernel asked for cuBLAS (sg_cuda_blas_table) */

#ifdef SG_CUDA_EMULATED
static long long emu_blas_calls;

/* How many products the stand-in computed (tests: cuBLAS's path was taken). */
SG_EXPORT long long sg_cuda_emu_blas_calls(void) { return emu_blas_calls; }

/* The stand-in: column-major C = alpha op(A) op(B) + beta C, as cuBLAS. */
template <class T>
static int emu_gemm(void *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *a,
                    int lda, const T *b, int ldb, const T *beta, T *c, int ldc) {
    (void)h;
    emu_blas_calls++;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            T acc = 0;
            for (int p = 0; p < k; p++) {
                const T x = ta == SG_CUBLAS_OP_N ? a[i + (int64_t)p * lda] : a[p + (int64_t)i * lda];
                const T y = tb == SG_CUBLAS_OP_N ? b[p + (int64_t)j * ldb] : b[j + (int64_t)p * ldb];
                acc += x * y;
            }
            T *out = &c[i + (int64_t)j * ldc];
            *out = *beta == 0 ? *alpha * acc : *alpha * acc + *beta * *out;
        }
    return 0;
}

static int blas_load(sg_device *dev) {
    static const float f[2] = {1, 0};
    static const double d[2] = {1, 0};
    sg_cublas_table *t = &dev->blas;
    t->sgemm = emu_gemm<float>;
    t->dgemm = emu_gemm<double>;
    t->one_f = &f[0]; t->zero_f = &f[1];
    t->one_d = &d[0]; t->zero_d = &d[1];
    return 0;
}
#else
/* cuBLAS on `dev` (selected by the caller): a handle and the constants 1 and
 * 0 in its memory. */
static int blas_load(sg_device *dev) {
    static void *lib;
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                  "libcublas.so", NULL};
    for (int i = 0; names[i] != NULL && lib == NULL; i++) lib = dlopen(names[i], RTLD_NOW);
    if (lib == NULL) return -1;
    sg_cublas_table *t = &dev->blas;
    typedef int (*create_fn)(void **);
    typedef int (*mode_fn)(void *, int);
    create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
    mode_fn pointer_mode = (mode_fn)dlsym(lib, "cublasSetPointerMode_v2");
    t->sgemm = (sg_cublas_sgemm_fn)dlsym(lib, "cublasSgemm_v2");
    t->dgemm = (sg_cublas_dgemm_fn)dlsym(lib, "cublasDgemm_v2");
    if (!create || !pointer_mode || !t->sgemm || !t->dgemm) return -1;
    /* alpha and beta live on the device (the nodes' scalars, and these) */
    if (create(&t->handle) != 0 || pointer_mode(t->handle, 1) != 0) return -1;
    static const float f[2] = {1, 0};
    static const double d[2] = {1, 0};
    size_t got = 0;
    char *constants = (char *)cache_take(dev, sizeof f + sizeof d, &got);
    if (constants == NULL) return -1;
    if (cudaMemcpy(constants, f, sizeof f, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(constants + sizeof f, d, sizeof d, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    t->one_f = (const float *)constants;
    t->zero_f = t->one_f + 1;
    t->one_d = (const double *)(constants + sizeof f);
    t->zero_d = t->one_d + 1;
    return 0;
}
#endif

/* Show `d`'s table to the kernels (cuBLAS started on d when first needed);
 * an empty table where it cannot start. */
static void blas_show(sg_device *d) {
    if (!blas_wanted) return;
    if (d->blas_state == 0) d->blas_state = blas_load(d) == 0 ? 1 : -1;
    if (d->blas_state == 1) shown_blas = d->blas;
    else memset(&shown_blas, 0, sizeof shown_blas);
}

/* The cuBLAS table the kernels hold (showing the current device's), or NULL
 * where cuBLAS is not installed. */
SG_EXPORT const sg_cublas_table *sg_cuda_blas_table(void) {
    if (current == NULL) return NULL;
    blas_wanted = 1;
    blas_show(current);
    return current->blas_state == 1 ? &shown_blas : NULL;
}

/* Wait for every kernel launched so far on device `device`; 0, or -1 with a
 * RuntimeError set. */
SG_EXPORT int sg_cuda_synchronize(int device) {
    sg_device *d = device_of(device), *saved;
    if (d == NULL || borrow_device(d, &saved) < 0) return -1;
    cudaError_t rc = cudaDeviceSynchronize();
    restore_device(saved);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        PyErr_Format(PyExc_RuntimeError, "cuda%d failed while running kernels: %s", device,
                     cudaGetErrorString(rc));
        return -1;
    }
    return 0;
}

/* Give the cached blocks of device `device` back to it. */
SG_EXPORT void sg_cuda_empty_cache(int device) {
    sg_device *d = device_of(device);
    if (d == NULL) { PyErr_Clear(); return; }
    release_cache(d);
}

#ifdef SG_CUDA_EMULATED
/* How many devices the emulated device offers (gpu.emulate_devices), set
 * before the first is used. */
SG_EXPORT void sg_cuda_emu_set_device_count(int n) { cuda_emu::device_count = n; }

/* The emulated device grants no allocation above `bytes` (0: no limit): how
 * tests reach the out-of-memory path. */
SG_EXPORT void sg_cuda_emu_set_max_allocation(size_t bytes) { cuda_emu::max_allocation = bytes; }
#endif
