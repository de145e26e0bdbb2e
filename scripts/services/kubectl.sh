#!/usr/bin/env bash
# kubectl for tests/k8s: the tests point kubectl at their loopback Kubernetes API server as evidence
# that it speaks the real protocol. Idempotent: does nothing when a working kubectl is on PATH;
# otherwise installs Debian's kubernetes-client (bookworm: 1.20), running apt-get update only when
# the package index does not know the package yet.
set -euo pipefail
if command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1; then
  echo "kubectl present: $(command -v kubectl) ($(kubectl version --client 2>/dev/null | head -n 1))"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! apt-cache policy kubernetes-client 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
kubectl version --client
