"""The run-time plan shared by every reduction kernel (C support code).

``sg_red_plan_build`` turns an element-wise shape, the inputs' strides, the
reduced axes and the output's strides into kept and reduced dimension lists:
size-1 dimensions dropped (a size-1 input dimension broadcasts: stride 0),
each list sorted by stride, largest first (the reduced list keeps C order
when asked, for argmax/argmin), and neighbours merged where every array
steps through them as one.  ``reduce_codegen`` generates the loops over it.
"""

#: The most inputs a fused reduction's kernel takes (the planner's table width).
MAX_INPUTS = 16

SUPPORT_KEY = "sg_reduce_plan_v1"
SUPPORT = r"""
/* symgraph reductions: the run-time plan shared by every reduction kernel. */
#define SG_RED_MAXIN %(maxin)d

/* Kept (k*) and reduced (r*) dimensions after dropping size-1 dimensions,
 * sorting and merging; kstr[d][i] is input i's byte stride along kept
 * dimension d, ostr[d] the output's.  Both lists hold at least one dimension
 * (a dummy of size 1) so that kernels need no special case. */
typedef struct {
    int nk, nr;
    int64_t ksize, rsize;
    int64_t kshape[SG_MAXDIMS], rshape[SG_MAXDIMS], ostr[SG_MAXDIMS];
    int64_t kstr[SG_MAXDIMS][SG_RED_MAXIN], rstr[SG_MAXDIMS][SG_RED_MAXIN];
} sg_red_plan;

/* How far one step along a dimension moves through all inputs. */
static inline int64_t sg_red_key(const int64_t *s, int nin) {
    int64_t t = 0;
    for (int i = 0; i < nin; i++) t += s[i] < 0 ? -s[i] : s[i];
    return t;
}

static void sg_red_swap(int nin, int64_t *shape, int64_t (*str)[SG_RED_MAXIN], int64_t *ostr,
                        int a, int b) {
    int64_t t = shape[a]; shape[a] = shape[b]; shape[b] = t;
    for (int i = 0; i < nin; i++) { t = str[a][i]; str[a][i] = str[b][i]; str[b][i] = t; }
    if (ostr) { t = ostr[a]; ostr[a] = ostr[b]; ostr[b] = t; }
}

/* Largest stride first (stable insertion sort: there are few dimensions). */
static void sg_red_sort(int n, int nin, int64_t *shape, int64_t (*str)[SG_RED_MAXIN],
                        int64_t *ostr) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && sg_red_key(str[j - 1], nin) < sg_red_key(str[j], nin); j--)
            sg_red_swap(nin, shape, str, ostr, j - 1, j);
}

/* Merge dimension i into the one before it when every array (and the output,
 * for kept dimensions) steps through the pair as through one dimension. */
static int sg_red_merge(int n, int nin, int64_t *shape, int64_t (*str)[SG_RED_MAXIN],
                        int64_t *ostr) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0) {
            int ok = !ostr || ostr[m - 1] == ostr[i] * shape[i];
            for (int k = 0; ok && k < nin; k++) ok = str[m - 1][k] == str[i][k] * shape[i];
            if (ok) {
                shape[m - 1] *= shape[i];
                for (int k = 0; k < nin; k++) str[m - 1][k] = str[i][k];
                if (ostr) ostr[m - 1] = ostr[i];
                continue;
            }
        }
        if (m != i) {
            shape[m] = shape[i];
            for (int k = 0; k < nin; k++) str[m][k] = str[i][k];
            if (ostr) ostr[m] = ostr[i];
        }
        m++;
    }
    return m;
}

/* The plan for reducing the dimensions flagged in `reduced` of an element-wise
 * shape `shape` (ndim dims) computed from `nin` inputs of that rank (an input
 * of size 1 in a dimension is broadcast: stride 0) into `out`. */
static void sg_red_plan_build(sg_red_plan *p, int nin, const sg_array *in, int ndim,
                              const int64_t *shape, const unsigned char *reduced,
                              const sg_array *out, int sort_reduced) {
    int j = 0;
    p->nk = p->nr = 0;
    p->ksize = p->rsize = 1;
    for (int d = 0; d < ndim; d++) {
        const int64_t n = shape[d];
        if (reduced[d]) {
            p->rsize *= n;
            if (n != 1) {
                const int r = p->nr++;
                p->rshape[r] = n;
                for (int k = 0; k < nin; k++)
                    p->rstr[r][k] = in[k].shape[d] == 1 ? 0 : in[k].strides[d];
            }
        } else {
            p->ksize *= n;
            if (n != 1) {
                const int c = p->nk++;
                p->kshape[c] = n;
                p->ostr[c] = out->strides[j];
                for (int k = 0; k < nin; k++)
                    p->kstr[c][k] = in[k].shape[d] == 1 ? 0 : in[k].strides[d];
            }
            j++;
        }
    }
    sg_red_sort(p->nk, nin, p->kshape, p->kstr, p->ostr);
    if (sort_reduced) sg_red_sort(p->nr, nin, p->rshape, p->rstr, NULL);
    p->nk = sg_red_merge(p->nk, nin, p->kshape, p->kstr, p->ostr);
    p->nr = sg_red_merge(p->nr, nin, p->rshape, p->rstr, NULL);
    if (p->nk == 0) {
        p->nk = 1; p->kshape[0] = 1; p->ostr[0] = 0;
        for (int k = 0; k < nin; k++) p->kstr[0][k] = 0;
    }
    if (p->nr == 0) {
        p->nr = 1; p->rshape[0] = 1;
        for (int k = 0; k < nin; k++) p->rstr[0][k] = 0;
    }
}

/* A shape as Python prints a tuple: "(2, 3)", "(4,)", "()". */
static void sg_red_fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %%lld" : "%%lld", (long long)shape[d]);
    if (ndim == 1 && n < cap) n += (size_t)snprintf(buf + n, cap - n, ",");
    if (n < cap) snprintf(buf + n, cap - n, ")");
}
""" % {"maxin": MAX_INPUTS}
