#!/usr/bin/env bash
# MLPerf Storage's training and checkpointing workloads at their closed sizes against one daemon
# on loopback (tcp): for each training model, the most accelerators whose mean AU passes on a
# media preset (`train --find-max-accelerators`), the dataset sized by the closed rule for this
# host's RAM (repeating volumes hold it: the store keeps REPEAT of each volume's bytes); then
# llama3-8b checkpointing with its 8 ranks at once. Each run's JSON and table land in OUT
# (docs/benchmarks.md, "Workloads at closed size"). On the GPU host:
#   bash bench/workload_closed.sh BIN_DIR OUT_DIR
# BIN_DIR holds gdrstored (and PYTHONPATH/GDRSTORE_LIBRARY reach the package, or it is
# installed). Env: GPU (default 0; empty: host memory and sleep compute), STEPS and EPOCHS of
# each search's runs (defaults 24 and 1: a closed run reads 5 whole epochs of >= 500 steps,
# which the lent host's time does not allow; the result names both as deviations), MODELS
# ("unet3d:nvme-gen5 resnet50:sata-ssd cosmoflow:nvme-gen4:500": model:preset[:steps], the steps
# overriding STEPS for that model), REPEAT (4GiB),
# CKPT ("llama3-8b"; empty: none), CKPT_WRITES/CKPT_READS (2/2), MAX_N (32), TRAIN_ARGS (more
# train flags, e.g. "--deadline 300").
set -euo pipefail
BIN=${1:?usage: workload_closed.sh BIN_DIR OUT_DIR}
OUT=${2:?usage: workload_closed.sh BIN_DIR OUT_DIR}
GPU=${GPU-0}
STEPS=${STEPS:-24}
EPOCHS=${EPOCHS:-1}
MODELS=${MODELS:-"unet3d:nvme-gen5 resnet50:sata-ssd cosmoflow:nvme-gen4:500"}
REPEAT=${REPEAT:-4GiB}
CKPT=${CKPT-llama3-8b}
CKPT_WRITES=${CKPT_WRITES:-2}
CKPT_READS=${CKPT_READS:-2}
MAX_N=${MAX_N:-32}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
source "$(dirname "$0")/daemon_lib.sh"
bench_daemon "$BIN/gdrstored" "$OUT/daemon.log" --max-op-size 256MiB --log-level warning
daemon=127.0.0.1:$bench_port
gpu=()
[[ -n $GPU ]] && gpu=(--gpu "$GPU")

for pair in $MODELS; do
  IFS=: read -r model preset steps <<<"$pair"
  steps=${steps:-$STEPS}
  echo "== train $model on media=$preset: the most accelerators that pass"
  t0=$SECONDS
  rc=0
  "$PY" -m gdrstore.workload train --daemon "$daemon" --model "$model" --media "media=$preset" \
    --repeat "$REPEAT" --steps "$steps" --epochs "$EPOCHS" --find-max-accelerators \
    --max-accelerators "$MAX_N" --prefix "closed-$model" --out "$OUT/train-$model" \
    "${gpu[@]}" ${TRAIN_ARGS:-} || rc=$?
  echo "-- train $model: exit $rc after $((SECONDS - t0)) s"
done

if [[ -n $CKPT ]]; then
  echo "== checkpoint $CKPT: every rank at once"
  t0=$SECONDS
  rc=0
  "$PY" -m gdrstore.workload checkpoint --daemon "$daemon" --model "$CKPT" \
    --num-checkpoints-write "$CKPT_WRITES" --num-checkpoints-read "$CKPT_READS" \
    --prefix "closed-ckpt" --out "$OUT/checkpoint-$CKPT" "${gpu[@]}" || rc=$?
  echo "-- checkpoint $CKPT: exit $rc after $((SECONDS - t0)) s"
fi
