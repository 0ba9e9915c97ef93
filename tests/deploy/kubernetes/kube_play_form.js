// A DaemonSet's pod template, from a rendered overlay, in a form `podman kube play` runs: a
// Deployment of one replica (podman 4.3 plays Pods and Deployments, not DaemonSets), on the pod
// network instead of the host's, its hostPath volumes moved under a scratch directory, and the
// ConfigMaps it mounts or takes its environment from beside it (FROM=TO replacing text in their
// data), every image IMAGE, and $(VAR) in the containers' arguments expanded as kubelet does
// (pod_env.js; podman 4.3 expands none).
// usage: node kube_play_form.js FILE DAEMONSET SCRATCH_DIR IMAGE [FROM=TO ...]
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const { expand, envOf } = require("./pod_env");

const [file, name, scratch, image, ...edits] = process.argv.slice(2);
const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJSON());
const ds = docs.find((o) => o && o.kind === "DaemonSet" && o.metadata.name === name);
if (!ds) {
  console.error(`no DaemonSet ${name} in ${file}`);
  process.exit(1);
}
const spec = ds.spec.template.spec;
delete spec.nodeSelector;
spec.hostNetwork = false;
// What host PID gives the agent (workloads' CUDA IPC handles) is checked on the GPU host
// (tests/gpu/pod_view.sh); the pods here run in namespaces of their own.
delete spec.hostPID;
// podman 4.3 restarts init containers with the pod's policy: with Always it never gets past them.
spec.restartPolicy = "OnFailure";
spec.dnsPolicy = "ClusterFirst";
for (const v of spec.volumes || []) {
  if (v.hostPath) {
    v.hostPath.path = path.join(scratch, v.hostPath.path.replace(/\//g, "_"));
  } else if (v.secret) {  // the caller puts the Secret's files in SCRATCH/secret_NAME
    v.hostPath = { path: path.join(scratch, `secret_${v.secret.secretName}`), type: "Directory" };
    delete v.secret;
  }
}
for (const c of [...(spec.initContainers || []), ...spec.containers]) {
  c.image = image;
  // podman 4.3 has no status.podIP for the downward API; this pod's namespace is its own, so its
  // every address is the pod's.
  for (const e of c.env || []) {
    if (e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath === "status.podIP") {
      delete e.valueFrom;
      e.value = "0.0.0.0";
    }
  }
  const env = envOf(c, docs);
  for (const field of ["command", "args"]) {
    if (c[field]) c[field] = c[field].map((a) => expand(a, env));
  }
}
const out = [{
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: ds.metadata.name, labels: ds.metadata.labels },
  spec: { replicas: 1, selector: ds.spec.selector, template: ds.spec.template },
}];
const wanted = new Set((spec.volumes || []).filter((v) => v.configMap).map((v) => v.configMap.name));
for (const c of [...(spec.initContainers || []), ...spec.containers]) {
  for (const from of c.envFrom || []) if (from.configMapRef) wanted.add(from.configMapRef.name);
  for (const e of c.env || []) {
    if (e.valueFrom && e.valueFrom.configMapKeyRef) wanted.add(e.valueFrom.configMapKeyRef.name);
  }
}
for (const o of docs) {
  if (o && o.kind === "ConfigMap" && wanted.has(o.metadata.name)) {
    for (const key of Object.keys(o.data || {})) {
      for (const e of edits) {
        const at = e.indexOf("=");
        o.data[key] = o.data[key].split(e.slice(0, at)).join(e.slice(at + 1));
      }
    }
    out.push(o);
  }
}
process.stdout.write(out.map((o) => YAML.stringify(o)).join("---\n"));
