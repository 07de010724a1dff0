"""Import time: ``import symgraph`` does not load SciPy's special functions or its
linear algebra; the ops that use them load them when they first compute, with the
same values, equality, pickles and cache keys as before."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph.compile.warm_key import canon
from symgraph.ops import linalg, math_extra, scalar_math, special_extra
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.lazy_scipy import ScipyFunction

PY = symgraph.Mode(linker="py", optimizer="fast_run")
HEAVY = ("scipy.special", "scipy.linalg")


def _fresh(code):
    """Run ``code`` in a new interpreter and return what it prints as JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_symgraph_does_not_import_scipy_special_or_linalg():
    loaded = _fresh("import json, sys\nimport symgraph, symgraph.tensor\n"
                    f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    assert loaded == []


def test_building_graphs_and_comparing_ops_needs_no_scipy():
    # Making nodes, hashing ops and taking their cache-key form is what a
    # compile does before any op computes; none of it may pull SciPy in.
    code = """import json, pickle, sys
import symgraph.tensor as T
from symgraph.compile.warm_key import canon
from symgraph.ops import math_extra, scalar_math, special_extra, linalg
from symgraph.ops.elemwise import Elemwise
x = T.dmatrix("x")
outs = [T.nnet.sigmoid(x), T.erf(x), math_extra.gamma(x), special_extra.jv(x, x),
        linalg.cholesky(x), linalg.expm(x)]
ops = [Elemwise(scalar_math.Erf()), Elemwise(special_extra.GammaU()),
       Elemwise(math_extra.Gamma()), linalg.Cholesky()]
forms = [repr(canon(op)) for op in ops]
blobs = [pickle.dumps(op, protocol=4).hex() for op in ops]
hashes = [hash(op) == hash(type(op)(*[getattr(op, p) for p in op.__props__])) for op in ops]
print(json.dumps({"loaded": [m for m in %r if m in sys.modules], "forms": forms,
                  "pickles": blobs, "hashes": hashes}))""" % (HEAVY,)
    result = _fresh(code)
    assert result["loaded"] == []
    assert all(result["hashes"])
    # this process has imported SciPy: the ops' key forms and pickles are the same
    ops = [Elemwise(scalar_math.Erf()), Elemwise(special_extra.GammaU()),
           Elemwise(math_extra.Gamma()), linalg.Cholesky()]
    assert result["forms"] == [repr(canon(op)) for op in ops]
    assert result["pickles"] == [pickle.dumps(op, protocol=4).hex() for op in ops]


def test_lazy_attribute_is_scipys_own_function():
    assert scalar_math.Erf.ufunc is scipy.special.erf
    assert scalar_math.Sigmoid().ufunc is scipy.special.expit
    assert math_extra.Gamma.ufunc is scipy.special.gamma
    assert special_extra.Iv().ufunc is scipy.special.iv
    assert isinstance(vars(scalar_math.Erf)["ufunc"], ScipyFunction)
    assert "scipy.special.erf" in repr(vars(scalar_math.Erf)["ufunc"])
    # an unpickled op computes with the same function
    op = pickle.loads(pickle.dumps(scalar_math.GammaLn()))
    assert op.ufunc is scipy.special.gammaln and op == scalar_math.GammaLn()


def test_ops_compute_scipys_values_after_lazy_loading():
    # in a fresh process, so that the first use is what loads SciPy
    code = """import json, sys
import numpy as np
import symgraph, symgraph.tensor as T
from symgraph.ops import math_extra, special_extra, linalg
mode = symgraph.Mode(linker="py", optimizer="fast_run")
x = T.dvector("x")
f = symgraph.function([x], [T.nnet.sigmoid(x), T.erf(x), T.erfinv(x / 4), math_extra.gamma(x),
                             special_extra.gammau(x, x), special_extra.chi2sf(x, x)], mode=mode)
before = [m for m in %r if m in sys.modules]
v = np.array([0.5, 1.0, 2.5])
print(json.dumps({"before": before, "values": [np.asarray(r).tolist() for r in f(v)]}))""" % (
        HEAVY,)
    result = _fresh(code)
    assert "scipy.linalg" not in result["before"]
    v = np.array([0.5, 1.0, 2.5])
    sp = scipy.special
    expected = [sp.expit(v), sp.erf(v), sp.erfinv(v / 4), sp.gamma(v),
                sp.gammaincc(v, v) * sp.gamma(v), sp.chdtrc(v, v)]
    for got, want in zip(result["values"], expected):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_linalg_ops_compute_after_lazy_loading():
    a = T.dmatrix("a")
    b = T.dmatrix("b")
    f = symgraph.function([a, b], [linalg.cholesky(a), linalg.solve_lower_triangular(a, b),
                                   linalg.expm(a), linalg.eigvalsh(a, b)], mode=PY)
    rng = np.random.default_rng(3)
    m = rng.random((4, 4))
    spd = m @ m.T + 4 * np.eye(4)
    other = np.eye(4) * 2.0
    chol, tri, ex, ev = f(spd, other)
    np.testing.assert_allclose(chol, scipy.linalg.cholesky(spd, lower=True), rtol=1e-12)
    np.testing.assert_allclose(tri, scipy.linalg.solve_triangular(spd, other, lower=True),
                               rtol=1e-12)
    np.testing.assert_allclose(ex, scipy.linalg.expm(spd), rtol=1e-10)
    np.testing.assert_allclose(ev, scipy.linalg.eigvalsh(spd, other), rtol=1e-10)



def test_flag_section_clashes_are_found_both_ways():
    # add_flag checks clashes against a set of sections (a per-flag cost at import)
    from symgraph.config import BoolParam, ConfigError, add_flag

    with pytest.raises(ConfigError, match="clashes with flag 'floatX'"):
        add_flag("floatX.part", "a flag under a flag", BoolParam(False))
    with pytest.raises(ConfigError, match=r"clashes with flag 'dnn\.conv\.\w+'"):
        add_flag("dnn.conv", "a section already", BoolParam(False))
    with pytest.raises(ConfigError, match="clashes with flag 'dnn"):
        add_flag("dnn", "a section already", BoolParam(False))


def test_import_asks_the_platform_nothing_until_a_template_uses_it():
    # platform.processor() runs `uname -p` in a subprocess: checking the
    # default of compiledir_format at import must not call it
    code = """import json, platform
calls = []
real = platform.processor
platform.processor = lambda: calls.append(1) or real()
import symgraph
from symgraph.configdefaults_theano import compiledir_format_values
at_import = len(calls)
name = "c_%(processor)s_%(python_version)s" % compiledir_format_values()
print(json.dumps({"at_import": at_import, "after": len(calls), "name": name}))"""
    result = _fresh(code)
    assert result["at_import"] == 0 and result["after"] == 1
    assert result["name"].startswith("c_") and result["name"].endswith(
        "_%d.%d" % sys.version_info[:2])
