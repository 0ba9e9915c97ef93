// A container's command and arguments as kubelet runs them: its environment resolved (values,
// the rendered ConfigMaps by envFrom or configMapKeyRef, the downward API fields the caller
// knows) and $(VAR) references expanded by Kubernetes' rules ($$ is a literal $, an unknown
// $(VAR) stays as it is).
// The manifests choose per overlay through ConfigMap keys (gdrstore-transport) that reach argv
// this way; podman 4.3's kube play expands none of it, so its form of a pod is expanded here.
"use strict";

function expand(text, env) {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== "$" || i + 1 === text.length) {
      out += text[i];
    } else if (text[i + 1] === "$") {
      out += "$";
      i++;
    } else if (text[i + 1] === "(" && text.indexOf(")", i) > 0) {
      const end = text.indexOf(")", i);
      const name = text.slice(i + 2, end);
      out += env.has(name) ? env.get(name) : text.slice(i, end + 1);
      i = end;
    } else {
      out += "$";
    }
  }
  return out;
}

// The container's environment: NAME -> value, for the entries that resolve. fields maps a
// downward API fieldPath (e.g. status.podIP) to its value where the caller has one.
function envOf(container, objects, fields = {}) {
  const env = new Map();
  const configMap = (name) =>
    objects.find((o) => o && o.kind === "ConfigMap" && o.metadata.name === name);
  // envFrom first; env's entries override them, as kubelet does.
  for (const from of container.envFrom || []) {
    const cm = from.configMapRef && configMap(from.configMapRef.name);
    for (const [k, v] of Object.entries((cm && cm.data) || {})) {
      env.set(`${from.prefix || ""}${k}`, v);
    }
  }
  for (const e of container.env || []) {
    if (e.value !== undefined) {
      env.set(e.name, expand(String(e.value), env));
    } else if (e.valueFrom && e.valueFrom.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const cm = configMap(ref.name);
      if (cm && cm.data && ref.key in cm.data) env.set(e.name, cm.data[ref.key]);
    } else if (e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath in fields) {
      env.set(e.name, fields[e.valueFrom.fieldRef.fieldPath]);
    }
  }
  return env;
}

// command then args, expanded: the argv kubelet starts.
function argvOf(container, objects, fields = {}) {
  const env = envOf(container, objects, fields);
  return [...(container.command || []), ...(container.args || [])].map((a) => expand(a, env));
}

module.exports = { expand, envOf, argvOf };
