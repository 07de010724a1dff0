"""Configuration as Theano's: rc files that do not exist, ``print(config)``."""

import os
import subprocess
import sys

import symgraph
from symgraph.config import Config, config


def _run(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != "SYMGRAPH_FLAGS"}
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                          text=True, timeout=120)


def test_import_with_missing_rc_file_succeeds(tmp_path):
    missing = str(tmp_path / "placeholder.symgraphrc")
    done = _run("import symgraph; print(symgraph.config.floatX)", SYMGRAPHRC=missing)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "float64"


def test_missing_files_skipped_existing_ones_read(tmp_path):
    present = tmp_path / "a.rc"
    present.write_text("[global]\nfloatX = float32\n")
    missing = tmp_path / "nope" / "b.rc"
    cfg = Config(environ={"SYMGRAPHRC": os.pathsep.join([str(missing), str(present)])})
    assert cfg.floatX == "float32"
    assert cfg.rc_files == (str(present),)
    assert cfg.rc_files_missing == (str(missing),)


def test_config_command_names_skipped_files(tmp_path):
    missing = str(tmp_path / "gone.rc")
    done = _run("import sys; from symgraph.__main__ import main; sys.exit(main(['config', "
                "'floatX']))", SYMGRAPHRC=missing)
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stdout and missing in done.stdout


def test_str_config_lists_every_flag():
    text = str(symgraph.config)
    names = [info.name for info in config.flags()]
    for name in names:
        assert f"\n{name} (" in "\n" + text
    assert text.count("    Value:  ") == len(names)
    assert "floatX (enum: float64, float32, float16)" in text
    assert f"    Value:  {config.floatX}" in text
    assert "    Doc:  Dtype of floats made without an explicit dtype." in text


def test_str_config_shows_changed_value_and_source():
    with config.change_flags(optimizer_verbose=True):
        text = str(config)
    block = text[text.index("\noptimizer_verbose ("):].split("\n\n")[0]
    assert "Value:  True" in block and "Source:  code" in block
