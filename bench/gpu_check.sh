#!/usr/bin/env bash
# symgraph on a machine with an NVIDIA GPU, in one run: what the emulated
# device cannot vouch for.  From the repository root:
#
#     bash bench/gpu_check.sh [LOG_DIR] [TEST_SECONDS]
#
# Needs python3 with numpy, scipy, pytest and pytest-xdist, nvcc on the PATH
# or in /usr/local/cuda, and the driver; PyTorch and JAX with CUDA for the
# benchmark's peers (optional).  It builds symgraph in place (no install),
# then runs, most telling first, each with its own time limit so that one
# hang does not cost the rest:
#   1. the device and the toolkit (nvidia-smi, nvcc --version);
#   2. the MLP demo on the GPU (issue's "done means": GPU nodes, losses
#      matching the CPU run) and the convnet demo;
#   3. the GPU benchmarks (bench/w_gpu.py --quick: G1-G4 against PyTorch
#      and JAX on the same GPU);
#   4. the gpu-marked tests on the GPU (SYMGRAPH_TEST_DEVICE=gpu), for at
#      most TEST_SECONDS (default 300), slowest first reported.
# Each step's output goes to LOG_DIR (default gpu-check-logs) and a summary
# of exit codes to LOG_DIR/summary.txt.
set -u
LOG_DIR=${1:-gpu-check-logs}
TEST_SECONDS=${2:-300}
mkdir -p "$LOG_DIR"
PY=${PYTHON:-python3}
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
SUMMARY="$LOG_DIR/summary.txt"
: > "$SUMMARY"

step() {            # step NAME SECONDS COMMAND...: run, log, record the exit code
    local name=$1 seconds=$2
    shift 2
    local start=$SECONDS
    echo "== $name" | tee -a "$SUMMARY"
    timeout "$seconds" "$@" > "$LOG_DIR/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc after $((SECONDS - start)) s" | tee -a "$SUMMARY"
    tail -n 25 "$LOG_DIR/$name.log"
    return 0
}

step device 60 bash -c 'nvidia-smi; nvcc --version; '"$PY"' -c "import numpy, scipy; \
print(\"numpy\", numpy.__version__, \"scipy\", scipy.__version__)"'
step build 600 "$PY" setup.py -q build_ext --inplace
step gpu_available 120 "$PY" -c 'import symgraph.gpu as g; print("is_available:", g.is_available())'
step demo_mlp 300 env SYMGRAPH_FLAGS=device=cuda,floatX=float32 "$PY" examples/demo.py
step demo_convnet 300 env SYMGRAPH_FLAGS=device=cuda,floatX=float32 "$PY" examples/convnet_demo.py
step bench_gpu 420 "$PY" bench/w_gpu.py --quick
step tests_gpu "$TEST_SECONDS" env SYMGRAPH_TEST_DEVICE=gpu "$PY" -m pytest -q -m gpu \
    -n "$(nproc)" -p no:cacheprovider --durations=15 tests/gpu
cat "$SUMMARY"
