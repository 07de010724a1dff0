#!/usr/bin/env bash
# symgraph on a machine with an NVIDIA GPU, in one run: what the emulated
# device cannot vouch for.  From the repository root:
#
#     bash bench/gpu_check.sh [LOG_DIR] [TEST_SECONDS]
#
# Needs python3 with numpy, scipy, pytest and pytest-xdist, nvcc on the PATH
# or in /usr/local/cuda, and the driver; PyTorch and JAX with CUDA for the
# benchmark's peers (optional); pytest-timeout (optional).  It builds
# symgraph in place (no install), then runs, most telling first, each with
# its own time limit so that one hang does not cost the rest (about 560 s in
# all with the default TEST_SECONDS):
#   1. the device and the toolkit (nvidia-smi, nvcc --version);
#   2. the MLP demo on the GPU (issue's "done means": GPU nodes, losses
#      matching the CPU run);
#   3. the gpu-marked tests on the GPU (SYMGRAPH_TEST_DEVICE=gpu), for at
#      most TEST_SECONDS (default 200): each result is logged as it comes
#      (-v), and at the limit pytest is interrupted, so it still reports the
#      failures so far;
#   4. the GPU benchmarks (bench/w_gpu.py --quick: G1-G4 against PyTorch
#      and JAX on the same GPU), the per-node profile of the training steps
#      (bench/w_gpu_profile.py), then the convnet demo.
# Kernels are built for this machine's GPUs only (nvcc.archs=native, several
# times faster to compile than the five common architectures).  Each step's
# output goes to LOG_DIR (default gpu-check-logs) and a summary of exit codes
# to LOG_DIR/summary.txt: nine files in all.
set -u
LOG_DIR=${1:-gpu-check-logs}
TEST_SECONDS=${2:-200}
mkdir -p "$LOG_DIR"
PY=${PYTHON:-python3}
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export SYMGRAPH_FLAGS="nvcc.archs=native${SYMGRAPH_FLAGS:+,$SYMGRAPH_FLAGS}"
GPU_FLAGS="device=cuda,floatX=float32,$SYMGRAPH_FLAGS"
SUMMARY="$LOG_DIR/summary.txt"
: > "$SUMMARY"

step() {            # step NAME SECONDS COMMAND...: run, log, record the exit code
    local name=$1 seconds=$2
    shift 2
    local start=$SECONDS
    echo "== $name" | tee -a "$SUMMARY"
    # SIGINT first: pytest and Python print what they have before they stop
    timeout -s INT -k 20 "$seconds" "$@" > "$LOG_DIR/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc after $((SECONDS - start)) s" | tee -a "$SUMMARY"
    tail -n 25 "$LOG_DIR/$name.log"
    return 0
}

step device 20 bash -c 'nvidia-smi; nvcc --version; '"$PY"' -c "import numpy, scipy, sysconfig, os; \
print(\"numpy\", numpy.__version__, \"scipy\", scipy.__version__); \
h = os.path.join(sysconfig.get_paths()[\"include\"], \"Python.h\"); print(h, os.path.exists(h))"'
step build 60 "$PY" setup.py -q build_ext --inplace
step gpu_available 30 "$PY" -c 'import symgraph.gpu as g; print("is_available:", g.is_available())'
step demo_mlp 90 env SYMGRAPH_FLAGS="$GPU_FLAGS" "$PY" examples/demo.py
TIMEOUT_PLUGIN=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_PLUGIN=(--timeout 90)
step tests_gpu "$TEST_SECONDS" env SYMGRAPH_TEST_DEVICE=gpu "$PY" -m pytest -v -rfEs --tb=short \
    -m gpu -n "$(nproc)" -p no:cacheprovider "${TIMEOUT_PLUGIN[@]}" --durations=15 tests/gpu
step bench_gpu 100 "$PY" bench/w_gpu.py --quick
step profile_gpu 60 "$PY" bench/w_gpu_profile.py
step demo_convnet 60 env SYMGRAPH_FLAGS="$GPU_FLAGS" "$PY" examples/convnet_demo.py
cat "$SUMMARY"
