"""Tests of symgraph.config: the flag registry, its sources, change_flags and the CLI.

Every test builds its own ``Config(environ=..., rc_paths=...)`` so that neither the
developer's environment nor ``~/.symgraphrc`` can change the outcome.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symgraph.config import (
    BoolParam, Config, ConfigError, DeviceParam, EnumParam, FloatParam, IntParam,
    UnknownFlagError, add_flag, change_flags, config)

REPO = Path(__file__).resolve().parent.parent
PRESETS = sorted((REPO / "config").glob("*.symgraphrc"))


def fresh(environ=None, rc_paths=()):
    """A Config that sees only what the test gives it."""
    return Config(environ=environ or {}, rc_paths=list(rc_paths))


def write_rc(tmp_path, text, name="rc.ini"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------- defaults

def test_defaults():
    cfg = fresh()
    assert cfg.device == "cpu"
    assert cfg.floatX == "float64"
    assert cfg.mode == "FAST_RUN"
    assert cfg.linker == "c|py"
    assert cfg.optimizer == "fast_run"
    assert cfg.optimizer_including == ""
    assert cfg.on_unused_input == "raise"
    assert cfg.compile_cache_size_mb == 2048
    assert cfg.openmp is True               # threads by default (docs/threads.md)
    assert cfg.openmp_elemwise_minsize == 16384
    assert cfg.traceback.limit == 8
    assert cfg.nan_guard.nan_is_error is True
    assert cfg.dnn.enabled == "auto"
    assert cfg.dnn.conv.algo_fwd == "small"
    assert cfg.dnn.conv.algo_bwd_data == "small"
    assert cfg.dnn.conv.algo_bwd_filter == "small"
    assert cfg.dnn.conv.precision == "as_input_f32"
    assert cfg.cuda.root == "/usr/local/cuda"
    assert cfg.deterministic == "default"
    assert all(info.source == "default" for info in cfg.flags())
    assert cfg.rc_files == ()


def test_compiledir_default_is_expanded_per_user():
    cfg = fresh()
    assert os.path.isabs(cfg.compiledir)
    assert "~" not in cfg.compiledir
    expected_parent = os.path.expanduser(os.path.join("~", ".cache", "symgraph"))
    assert os.path.dirname(cfg.compiledir) == expected_parent
    assert os.path.basename(cfg.compiledir).startswith("compiledir_")


def test_get_and_attribute_access_agree():
    cfg = fresh()
    assert cfg.get("dnn.conv.algo_fwd") == cfg.dnn.conv.algo_fwd
    assert cfg.get("gcc.cxxflags") == cfg.gcc.cxxflags == ""
    assert "conv" in dir(cfg.dnn)
    assert "floatX" in dir(cfg)


# ----------------------------------------------------------------------------- precedence

def test_rc_file_beats_default(tmp_path):
    rc = write_rc(tmp_path, "[global]\nfloatX = float32\n")
    cfg = fresh(rc_paths=[rc])
    assert cfg.floatX == "float32"
    assert cfg.source("floatX") == f"rc:{rc}"
    assert cfg.source("device") == "default"
    assert cfg.rc_files == (rc,)


def test_symgraphrc_list_later_file_wins(tmp_path):
    first = write_rc(tmp_path, "[global]\nfloatX = float32\ndevice = cuda\n", "a.rc")
    second = write_rc(tmp_path, "[global]\nfloatX = float16\n", "b.rc")
    cfg = Config(environ={"SYMGRAPHRC": os.pathsep.join([first, "", second])})
    assert cfg.floatX == "float16"
    assert cfg.source("floatX") == f"rc:{second}"
    assert cfg.device == "cuda"
    assert cfg.source("device") == f"rc:{first}"


def test_home_symgraphrc_used_when_symgraphrc_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_rc(tmp_path, "[global]\nmode = FAST_COMPILE\n", ".symgraphrc")
    cfg = Config(environ={})
    assert cfg.mode == "FAST_COMPILE"
    assert cfg.source("mode") == f"rc:{tmp_path / '.symgraphrc'}"


def test_missing_rc_file_named_in_symgraphrc_is_skipped(tmp_path):
    # Theano's behaviour (tests/compat/test_theano_config.py covers `import symgraph`)
    cfg = Config(environ={"SYMGRAPHRC": str(tmp_path / "nope.rc")})
    assert cfg.rc_files == ()
    assert cfg.rc_files_missing == (str(tmp_path / "nope.rc"),)


def test_env_beats_rc(tmp_path):
    rc = write_rc(tmp_path, "[global]\nfloatX = float32\ndevice = cuda\n")
    cfg = fresh({"SYMGRAPH_FLAGS": "floatX=float16"}, [rc])
    assert cfg.floatX == "float16"
    assert cfg.source("floatX") == "SYMGRAPH_FLAGS"
    assert cfg.device == "cuda"
    assert cfg.source("device") == f"rc:{rc}"


def test_code_beats_env():
    cfg = fresh({"SYMGRAPH_FLAGS": "floatX=float16"})
    cfg.floatX = "float32"
    assert cfg.floatX == "float32"
    assert cfg.source("floatX") == "code"
    cfg.dnn.conv.algo_fwd = "fft"
    assert cfg.get("dnn.conv.algo_fwd") == "fft"
    assert cfg.source("dnn.conv.algo_fwd") == "code"
    cfg.set("traceback.limit", "3")
    assert cfg.traceback.limit == 3


def test_symgraph_flags_parsing():
    cfg = fresh({"SYMGRAPH_FLAGS": " device = cuda0 ,floatX=float32,, "
                                   "dnn.conv.algo_fwd=time_once,"
                                   r"gcc.cxxflags=-O2 -Wl\,-rpath\,/opt/lib"})
    assert cfg.device == "cuda0"
    assert cfg.floatX == "float32"
    assert cfg.dnn.conv.algo_fwd == "time_once"
    assert cfg.gcc.cxxflags == "-O2 -Wl,-rpath,/opt/lib"


@pytest.mark.parametrize("flags", ["floatX", "=float32", "floatX=float32,openmp"])
def test_symgraph_flags_bad_entry_names_the_variable(flags):
    with pytest.raises(ConfigError, match="SYMGRAPH_FLAGS"):
        fresh({"SYMGRAPH_FLAGS": flags})


def test_bad_value_in_env_names_source_and_allowed_values():
    with pytest.raises(ConfigError) as info:
        fresh({"SYMGRAPH_FLAGS": "floatX=float33"})
    message = str(info.value)
    for part in ("SYMGRAPH_FLAGS", "floatX", "float33", "float64", "float32", "float16"):
        assert part in message


def test_reload_drops_code_values_and_keeps_state_on_error():
    env = {"SYMGRAPH_FLAGS": "floatX=float32"}
    cfg = fresh(env)
    cfg.device = "cuda"
    cfg.reload()
    assert cfg.device == "cpu" and cfg.floatX == "float32"
    env["SYMGRAPH_FLAGS"] = "floatX=bogus"
    with pytest.raises(ConfigError):
        cfg.reload()
    assert cfg.floatX == "float32"  # a failed reload changes nothing


# ----------------------------------------------------------------------------- rc files

def test_ini_sections_map_to_dotted_flags(tmp_path):
    rc = write_rc(tmp_path, """
# a comment
[global]
floatX = float32
gcc.cxxflags = -O3 -march=native   # inline comment
[dnn]
enabled = False
conv.precision = float32
[dnn.conv]
algo_fwd = fft
[nan_guard]
big_is_error = no
[gcc]
cxxflags = -O1 %s
""")
    cfg = fresh(rc_paths=[rc])
    assert cfg.floatX == "float32"
    assert cfg.dnn.enabled == "False"
    assert cfg.dnn.conv.precision == "float32"
    assert cfg.dnn.conv.algo_fwd == "fft"
    assert cfg.nan_guard.big_is_error is False
    assert cfg.gcc.cxxflags == "-O1 %s"  # later key wins; no '%' interpolation


def test_misspelled_section_lists_valid_sections(tmp_path):
    rc = write_rc(tmp_path, "[dnn.cnov]\nalgo_fwd = fft\n")
    with pytest.raises(ConfigError) as info:
        fresh(rc_paths=[rc])
    message = str(info.value)
    assert "[dnn.cnov]" in message and rc in message
    assert "did you mean: [dnn.conv]" in message
    for section in ("[global]", "[dnn]", "[dnn.conv]", "[gcc]", "[nan_guard]"):
        assert section in message


def test_unknown_key_in_section_lists_keys(tmp_path):
    rc = write_rc(tmp_path, "[dnn.conv]\nalgo_fdw = fft\n")
    with pytest.raises(ConfigError) as info:
        fresh(rc_paths=[rc])
    message = str(info.value)
    assert "algo_fdw" in message and "did you mean: algo_fwd" in message
    assert "precision" in message  # the valid keys of the section are listed


def test_bad_value_in_rc_names_file_and_section(tmp_path):
    rc = write_rc(tmp_path, "[dnn.conv]\nalgo_fwd = fastest\n")
    with pytest.raises(ConfigError) as info:
        fresh(rc_paths=[rc])
    message = str(info.value)
    assert rc in message and "[dnn.conv]" in message and "winograd" in message


@pytest.mark.parametrize("text", ["floatX = float32\n", "[global]\nfloatX\n",
                                  "[global]\nfloatX = a\nfloatX = b\n"])
def test_malformed_rc_file_is_a_config_error(tmp_path, text):
    rc = write_rc(tmp_path, text)
    with pytest.raises(ConfigError, match="not a valid INI"):
        fresh(rc_paths=[rc])


def test_flag_names_in_rc_are_case_sensitive(tmp_path):
    rc = write_rc(tmp_path, "[global]\nfloatx = float32\n")
    with pytest.raises(ConfigError, match="floatX"):
        fresh(rc_paths=[rc])


@pytest.mark.parametrize("preset", PRESETS, ids=[p.name for p in PRESETS])
def test_presets_parse(preset):
    cfg = fresh(rc_paths=[str(preset)])
    assert any(info.source.startswith("rc:") for info in cfg.flags())


def test_expected_presets_exist():
    assert {p.name for p in PRESETS} >= {
        "debug.symgraphrc", "fast_compile.symgraphrc", "gpu.symgraphrc"}


def test_gpu_preset_sets_both_backward_algorithms():
    cfg = fresh(rc_paths=[str(REPO / "config" / "gpu.symgraphrc")])
    assert cfg.device == "cuda" and cfg.floatX == "float32"
    assert cfg.dnn.conv.algo_bwd_data == cfg.dnn.conv.algo_bwd_filter == "time_once"


# ----------------------------------------------------------------------------- errors

def test_unknown_flag_lists_close_matches():
    cfg = fresh()
    with pytest.raises(UnknownFlagError, match="did you mean: floatX"):
        cfg.get("floatx")
    with pytest.raises(ConfigError, match="dnn.conv.algo_fwd"):
        cfg.dnn.conv.algo_fdw
    with pytest.raises(ConfigError, match="dnn.conv.algo_fwd"):
        fresh({"SYMGRAPH_FLAGS": "algo_fwd=fft"})
    with pytest.raises(ConfigError, match="unknown flag"):
        cfg.no_such_flag = 1
    with pytest.raises(ConfigError):
        cfg.source("nope")
    assert not hasattr(cfg, "no_such_flag")  # also an AttributeError
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("name, value, allowed", [
    ("floatX", "float128", ["float64", "float32", "float16"]),
    ("dnn.conv.algo_fwd", "fastest", ["small", "fft_tiling", "time_on_shape_change"]),
    ("dnn.conv.algo_bwd_filter", "fft_tiling", ["deterministic", "guess_once"]),
    ("device", "gpu", ["cpu", "cuda", "cuda0"]),
    ("openmp", "maybe", ["True", "False", "yes"]),
    ("compile_cache_size_mb", "-1", [">= 0"]),
    ("compile_cache_size_mb", "lots", ["integer"]),
])
def test_bad_value_lists_allowed_values(name, value, allowed):
    cfg = fresh()
    before = cfg.get(name)
    with pytest.raises(ConfigError) as info:
        cfg.set(name, value)
    message = str(info.value)
    assert name in message and repr(value) in message
    for word in allowed:
        assert word in message
    assert cfg.get(name) == before and cfg.source(name) == "default"


@pytest.mark.parametrize("text, expected", [
    ("True", True), ("true", True), ("1", True), ("yes", True), (1, True), (True, True),
    ("False", False), ("false", False), ("0", False), ("no", False), (0, False)])
def test_bool_spellings(text, expected):
    cfg = fresh()
    cfg.openmp = text
    assert cfg.openmp is expected


def test_param_conversions():
    assert DeviceParam("cpu").convert("CUDA1") == "cuda1"
    assert EnumParam("fast_run", "None").convert(None) == "None"
    assert EnumParam("auto", "True", "False").convert(True) == "True"
    assert IntParam(0).convert(" 12 ") == 12
    assert FloatParam(0.5, min=0.0, max=1.0).convert("0.25") == 0.25
    for param, value in [(IntParam(0), 2.5), (IntParam(0), True),
                         (FloatParam(0.0, max=1.0), "2"), (BoolParam(False), 2)]:
        with pytest.raises(ValueError):
            param.convert(value)


def test_add_flag_rejects_duplicates_and_section_clashes():
    with pytest.raises(ConfigError, match="twice"):
        add_flag("floatX", "again", EnumParam("float64"))
    with pytest.raises(ConfigError, match="section"):
        add_flag("dnn.conv", "a section already", BoolParam(False))
    with pytest.raises(ConfigError, match="hide"):
        add_flag("flags", "shadows a method", BoolParam(False))


# ----------------------------------------------------------------------------- algo_bwd

def test_algo_bwd_sets_both_from_every_source(tmp_path):
    cfg = fresh({"SYMGRAPH_FLAGS": "dnn.conv.algo_bwd=deterministic"})
    assert cfg.dnn.conv.algo_bwd_data == cfg.dnn.conv.algo_bwd_filter == "deterministic"
    assert cfg.source("dnn.conv.algo_bwd_filter") == "SYMGRAPH_FLAGS"
    cfg.dnn.conv.algo_bwd = "fft"
    assert cfg.dnn.conv.algo_bwd_data == cfg.dnn.conv.algo_bwd_filter == "fft"
    assert cfg.source("dnn.conv.algo_bwd_data") == "code"

    rc = write_rc(tmp_path, "[dnn.conv]\nalgo_bwd = small\n")
    cfg = fresh({"SYMGRAPH_FLAGS": "dnn.conv.algo_bwd_data=fft_tiling"}, [rc])
    assert cfg.dnn.conv.algo_bwd_filter == "small"
    assert cfg.dnn.conv.algo_bwd_data == "fft_tiling"  # the more specific, later source


def test_algo_bwd_allowed_sets():
    cfg = fresh()
    cfg.dnn.conv.algo_bwd_data = "fft_tiling"
    with pytest.raises(ConfigError):
        cfg.dnn.conv.algo_bwd_filter = "fft_tiling"
    for name in ("algo_bwd", "algo_bwd_data", "algo_bwd_filter"):
        with pytest.raises(ConfigError):
            cfg.set(f"dnn.conv.{name}", "winograd")


# ----------------------------------------------------------------------------- change_flags

def test_change_flags_context_manager_restores_value_and_source():
    cfg = fresh({"SYMGRAPH_FLAGS": "floatX=float32"})
    with cfg.change_flags(floatX="float16", device="cuda"):
        assert cfg.floatX == "float16" and cfg.device == "cuda"
        assert cfg.source("floatX") == "code"
    assert cfg.floatX == "float32" and cfg.source("floatX") == "SYMGRAPH_FLAGS"
    assert cfg.device == "cpu" and cfg.source("device") == "default"


def test_change_flags_dotted_dict_and_double_underscore():
    cfg = fresh()
    with cfg.change_flags({"dnn.conv.algo_fwd": "fft"}, dnn__conv__precision="float32"):
        assert cfg.dnn.conv.algo_fwd == "fft"
        assert cfg.dnn.conv.precision == "float32"
    assert cfg.dnn.conv.algo_fwd == "small"
    assert cfg.dnn.conv.precision == "as_input_f32"


def test_change_flags_restores_on_exception():
    cfg = fresh()
    with pytest.raises(RuntimeError):
        with cfg.change_flags(floatX="float32", dnn__conv__algo_bwd="fft"):
            raise RuntimeError("boom")
    assert cfg.floatX == "float64"
    assert cfg.dnn.conv.algo_bwd_data == cfg.dnn.conv.algo_bwd_filter == "small"
    assert cfg.source("dnn.conv.algo_bwd_data") == "default"


def test_change_flags_as_decorator_is_reentrant():
    cfg = fresh()
    seen = []

    @cfg.change_flags(floatX="float32")
    def inner(depth):
        seen.append(cfg.floatX)
        if depth:
            inner(depth - 1)
            assert cfg.floatX == "float32"  # the recursive call did not restore early
        return depth

    assert cfg.floatX == "float64"
    assert inner(2) == 2
    assert seen == ["float32"] * 3
    assert cfg.floatX == "float64"
    assert inner.__name__ == "inner"


def test_change_flags_nested_and_value_set_inside_is_undone():
    cfg = fresh()
    with cfg.change_flags(floatX="float32"):
        with cfg.change_flags(floatX="float16"):
            assert cfg.floatX == "float16"
        assert cfg.floatX == "float32"
        cfg.floatX = "float16"  # a change inside the block goes with it
    assert cfg.floatX == "float64"


def test_change_flags_validates_immediately():
    cfg = fresh()
    with pytest.raises(ConfigError, match="float64"):
        cfg.change_flags(floatX="float99")
    with pytest.raises(ConfigError, match="did you mean"):
        cfg.change_flags(floatx="float32")
    assert cfg.floatX == "float64"


def test_module_level_change_flags_uses_the_singleton():
    # `import symgraph.config as m` would give the Config object, which symgraph's
    # __init__ binds over the submodule's name; `from symgraph.config import` is safe
    cfg = config
    before = (cfg.profile, cfg.source("profile"))
    with change_flags(profile=not before[0]):
        assert cfg.profile is (not before[0])
    assert (cfg.profile, cfg.source("profile")) == before


# ----------------------------------------------------------------------------- c_key, flags

def test_c_key_covers_codegen_flags_only():
    cfg = fresh()
    key = dict(cfg.c_key())
    for name in ("floatX", "gcc.cxxflags", "openmp", "device", "nvcc.flags",
                 "dnn.enabled", "dnn.conv.algo_fwd", "dnn.conv.algo_bwd_data"):
        assert name in key
    # cxx by its signature (path and version: cpu.backend.compiler_identity), not its text
    for name in ("compiledir", "profile", "mode", "optimizer_verbose", "cxx"):
        assert name not in key
    assert cfg.c_key() == fresh().c_key()  # stable
    hash(cfg.c_key())
    with cfg.change_flags(floatX="float32"):
        assert dict(cfg.c_key())["floatX"] == "float32"


def test_flags_iterates_every_declared_flag():
    cfg = fresh({"SYMGRAPH_FLAGS": "openmp=0"})
    infos = {info.name: info for info in cfg.flags()}
    required = """device floatX warn_float64 mode linker optimizer optimizer_including
        optimizer_excluding optimizer_verbose on_opt_error on_unused_input compiledir
        compile_cache_size_mb compile_no_compile cxx gcc.cxxflags openmp
        openmp_elemwise_minsize openmp_reduce_minsize openmp_softmax_minsize
        openmp_pool_minsize openmp_conv_minsize openmp_batchnorm_minsize
        exception_verbosity traceback.limit profile
        profile_optimizer nan_guard.nan_is_error nan_guard.inf_is_error
        nan_guard.big_is_error dnn.enabled dnn.include_path dnn.library_path
        dnn.conv.algo_fwd dnn.conv.algo_bwd dnn.conv.algo_bwd_data
        dnn.conv.algo_bwd_filter dnn.conv.precision dnn.conv.workmem_bytes cuda.root
        nvcc.flags gpu.cross_compile deterministic""".split()
    assert set(required) <= set(infos)
    openmp = infos["openmp"]
    assert openmp.value is False and openmp.default is True
    assert openmp.source == "SYMGRAPH_FLAGS" and openmp.in_c_key
    assert all(info.doc for info in infos.values())


# ----------------------------------------------------------------------------- CLI

def run_cli(*args, flags=None, home=None):
    env = {k: v for k, v in os.environ.items() if k not in ("SYMGRAPHRC", "SYMGRAPH_FLAGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    if home is not None:
        env["HOME"] = str(home)  # no developer ~/.symgraphrc
    if flags is not None:
        env["SYMGRAPH_FLAGS"] = flags
    return subprocess.run([sys.executable, "-m", "symgraph", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_config_prints_every_flag_with_source(tmp_path):
    result = run_cli("config", flags="floatX=float32", home=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()
             if line and not line.startswith("#")}
    assert set(lines) == {info.name for info in fresh().flags()}
    assert "float32" in lines["floatX"] and "SYMGRAPH_FLAGS" in lines["floatX"]
    assert "float16" in lines["floatX"]  # the allowed values are shown
    assert "default" in lines["device"]


def test_cli_config_selected_flags_and_unknown_name(tmp_path):
    result = run_cli("config", "-v", "dnn.conv.algo_fwd", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "dnn.conv.algo_fwd" in result.stdout and "floatX" not in result.stdout
    result = run_cli("config", "floatx", home=tmp_path)
    assert result.returncode == 2 and "floatX" in result.stderr


def test_cli_unknown_or_missing_subcommand_is_usage_error(tmp_path):
    for args in (("frobnicate",), ()):
        result = run_cli(*args, home=tmp_path)
        assert result.returncode == 2
        assert "usage" in result.stderr and "config" in result.stderr
