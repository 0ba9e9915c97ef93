// Unknown fields in Kubernetes objects, as `kubectl apply --validate=strict` refuses them: each
// object is walked against the field lists of the API types (the Kubernetes OpenAPI spec as
// @kubernetes/client-node generates it: every type's attributeTypeMap). kubernetes-models' schemas
// check types and required fields but let any unknown field through, so a misspelled one
// (`imagePullPolicyy`, `tolerations` under the container) would be dropped silently by a cluster.
// unknownFields(doc) resolves to a list of problems: "unknown field \"PATH\"" (with the nearest
// known name), or the kind having no field list.
"use strict";
const { pathToFileURL } = require("url");

const models = new Map();  // type name -> its attributeTypeMap, or null when there is none

async function fieldsOf(type) {
  if (!models.has(type)) {
    let fields = null;
    try {
      const file = require.resolve(`@kubernetes/client-node/dist/gen/models/${type}.js`);
      const mod = await import(pathToFileURL(file).href);
      if (mod[type] && mod[type].getAttributeTypeMap) fields = mod[type].getAttributeTypeMap();
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND") throw e;
    }
    models.set(type, fields);
  }
  return models.get(type);
}

// The client's name of a kind's type: apps/v1 DaemonSet -> V1DaemonSet, v1 ConfigMap ->
// V1ConfigMap, policy/v1beta1 X -> V1beta1X.
function typeOfKind(apiVersion, kind) {
  const version = apiVersion.includes("/") ? apiVersion.split("/")[1] : apiVersion;
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

function distance(a, b) {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const next = Math.min(row[j] + 1, row[j - 1] + 1,
                            diag + (a[i - 1].toLowerCase() === b[j - 1].toLowerCase() ? 0 : 1));
      diag = row[j];
      row[j] = next;
    }
  }
  return row[b.length];
}

function nearest(name, known) {
  let best = null;
  for (const k of known) {
    const d = distance(name, k);
    if (d <= Math.max(2, Math.floor(k.length / 4)) && (!best || d < best.d)) best = { k, d };
  }
  return best ? ` (did you mean "${best.k}"?)` : "";
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

async function walk(value, type, path, problems) {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        await walk(value[i], array[1], `${path}[${i}]`, problems);
      }
    }
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) await walk(v, map[1], `${path}.${k}`, problems);
    }
    return;
  }
  // Primitives, free-form objects and IntOrString: their values are kubernetes-models' to check.
  if (!/^[A-Z]/.test(type) || type === "IntOrString" || type === "Date") return;
  const fields = await fieldsOf(type);
  if (!fields) {
    problems.push(`no field list for type ${type} at "${path}"`);
    return;
  }
  if (!isObject(value)) return;
  const byName = new Map(fields.map((f) => [f.baseName, f.type]));
  for (const [k, v] of Object.entries(value)) {
    const at = path ? `${path}.${k}` : k;
    if (!byName.has(k)) {
      problems.push(`unknown field "${at}"${nearest(k, byName.keys())}`);
    } else {
      await walk(v, byName.get(k), at, problems);
    }
  }
}

async function unknownFields(doc) {
  const type = typeOfKind(doc.apiVersion, doc.kind);
  if (!(await fieldsOf(type))) {
    return [`no field list for ${doc.apiVersion} ${doc.kind} (unknown fields go unchecked)`];
  }
  const problems = [];
  await walk(doc, type, "", problems);
  return problems;
}

module.exports = { unknownFields };
