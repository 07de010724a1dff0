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

#include "cuda/memory_devices.inc"

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

/* A DeviceArray over `d` (memory of `of`, of dtype `typenum`), keeping `of`
 * alive as its base. */
static PyObject *dev_view(DevArray *of, const sg_array *d, int typenum) {
    DevArray *v = (DevArray *)dev_type->tp_alloc(dev_type, 0);
    if (v == NULL) return NULL;
    v->data = d->data;
    v->ndim = d->ndim;
    v->typenum = typenum;
    v->dev = of->dev;
    memcpy(v->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim);
    memcpy(v->strides, d->strides, sizeof(int64_t) * (size_t)d->ndim);
    Py_INCREF((PyObject *)of);
    v->base = (PyObject *)of;
    return (PyObject *)v;
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
 * symgraph's kernels run: a consumer on another stream waits for it.  That
 * handle means the legacy stream of the consumer's current device, though:
 * for an array of another device (a result on cuda1 read while cuda0 is
 * current) the consumer would wait for the wrong device, so symgraph waits
 * for the array's device itself and says "stream" None (nothing pending). */
#ifdef SG_CUDA_EMULATED
static long long emu_interface_waits;

/* How many times the interface waited for an array's device (tests: symgraph
 * itself never reads its own arrays' interface). */
SG_EXPORT long long sg_cuda_emu_interface_waits(void) { return emu_interface_waits; }
#endif

static PyObject *dev_interface(PyObject *self, void *c) {
    (void)c;
    const DevArray *a = (DevArray *)self;
    int now = -1;
    PyObject *stream;
    const cudaError_t asked = cudaGetDevice(&now);
    if (asked != cudaSuccess) cudaGetLastError();
    if (asked == cudaSuccess && now == a->dev->index) {
        stream = PyLong_FromLong(1);
    } else {
        sg_device *saved;
        if (borrow_device(a->dev, &saved) < 0) return NULL;
        cudaError_t rc = cudaStreamSynchronize(0);
        restore_device(saved);
        if (rc != cudaSuccess) {
            cudaGetLastError();
            PyErr_Format(PyExc_RuntimeError, "cuda%d failed while running kernels: %s",
                         a->dev->index, cudaGetErrorString(rc));
            return NULL;
        }
#ifdef SG_CUDA_EMULATED
        emu_interface_waits++;
#endif
        stream = Py_None;
        Py_INCREF(stream);
    }
    if (stream == NULL) return NULL;
    PyArray_Descr *d = PyArray_DescrFromType(a->typenum);
    if (d == NULL) { Py_DECREF(stream); return NULL; }
    PyObject *typestr = PyObject_GetAttrString((PyObject *)d, "str");
    Py_DECREF(d);
    if (typestr == NULL) { Py_DECREF(stream); return NULL; }
    PyObject *strides;
    if (dev_contiguous(a, dev_itemsize(a->typenum))) {
        strides = Py_None;
        Py_INCREF(strides);
    } else {
        strides = dev_tuple(a->strides, a->ndim);
    }
    /* an empty array's address is 0 by the protocol's rule */
    void *data = dev_size(a) == 0 ? NULL : a->data;
    return Py_BuildValue("{s:N,s:N,s:(NO),s:N,s:i,s:N}", "shape", dev_tuple(a->shape, a->ndim),
                         "typestr", typestr, "data", PyLong_FromVoidPtr(data), Py_False,
                         "strides", strides, "version", 3, "stream", stream);
}

/* float(a), int(a), len(a): as NumPy's for the host copy, so a device result
 * (a cost, a count) converts like an ndarray would; len() needs no copy. */
static PyObject *dev_convert(PyObject *self, PyObject *(*convert)(PyObject *)) {
    PyObject *host = dev_to_host((DevArray *)self);
    if (host == NULL) return NULL;
    PyObject *r = convert(host);
    Py_DECREF(host);
    return r;
}

static PyObject *dev_float(PyObject *self) { return dev_convert(self, PyNumber_Float); }

static PyObject *dev_int(PyObject *self) { return dev_convert(self, PyNumber_Long); }

static Py_ssize_t dev_len(PyObject *self) {
    const DevArray *a = (DevArray *)self;
    if (a->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d DeviceArray");
        return -1;
    }
    return (Py_ssize_t)a->shape[0];
}

#include "cuda/memory_index.inc"

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
    {"item", dev_item, METH_VARARGS, "a.item(*args): numpy's item() of the host copy (a "
     "Python scalar)."},
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
    {Py_nb_float, (void *)dev_float},
    {Py_nb_int, (void *)dev_int},
    {Py_sq_length, (void *)dev_len},
    {Py_mp_length, (void *)dev_len},
    {Py_mp_subscript, (void *)dev_subscript},
    {Py_sq_item, (void *)dev_seq_item},
    {Py_nb_bool, (void *)dev_bool},
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
    return dev_view((DevArray *)base, d, typenum);
}

static int mem_enter(void *ctx) { return select_device((sg_device *)ctx); }

#include "cuda/memory_peer.inc"

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
        sg_device *saved = thread_device();
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

/* The device whose memory `ptr` is (another library's array), or -1 where
 * CUDA does not tie it to one device: host or managed memory, an unknown
 * pointer.  The emulated devices answer from their record of allocations. */
SG_EXPORT int sg_cuda_pointer_device(uintptr_t ptr) {
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, (const void *)ptr) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return attr.type == cudaMemoryTypeDevice ? attr.device : -1;
}

#ifdef SG_CUDA_EMULATED
/* The emulated device this library selected on the calling thread: the
 * kernel libraries ask it before a launch (cuda_emu_current_device_hook). */
SG_EXPORT int sg_cuda_emu_current_device(void) { return cuda_emu::t_device; }
#endif

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

#include "cuda/memory_cublas.inc"

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

/* Make `device` the calling thread's current device behind this library's
 * back, as another library does (torch.cuda.set_device): tests. */
SG_EXPORT int sg_cuda_emu_switch_device(int device) {
    return cudaSetDevice(device) == cudaSuccess ? 0 : -1;
}

/* The calling thread's current device, as CUDA sees it: tests. */
SG_EXPORT int sg_cuda_emu_thread_device(void) {
    int device = -1;
    cudaGetDevice(&device);
    return device;
}

/* The emulated device grants no allocation above `bytes` (0: no limit): how
 * tests reach the out-of-memory path. */
SG_EXPORT void sg_cuda_emu_set_max_allocation(size_t bytes) { cuda_emu::max_allocation = bytes; }
#endif
