// Validates rendered Kubernetes manifests (multi-document YAML files) against the Kubernetes API
// schemas, through kubernetes-models' validators, refuses unknown fields (strict_fields.js: a
// misspelled field is an error, as with `kubectl apply --validate=strict`), and checks what
// docs/kubernetes.md promises of them. usage: node validate.js OVERLAY FILE... (OVERLAY: tcp,
// rc, dc or examples). Prints one line per object and each problem; exits 1 on any.
"use strict";
const fs = require("fs");
const YAML = require("yaml");
const { argvOf } = require("./pod_env");
const { unknownFields } = require("./strict_fields");

const problems = [];
const bad = (where, what) => problems.push(`${where}: ${what}`);

function modelOf(doc) {
  const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/")
                                                         : [null, doc.apiVersion];
  const path = group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
  let mod;
  try {
    mod = require(path);
  } catch (e) {
    return null;
  }
  return mod[doc.kind] || null;
}

function podSpec(doc) {
  if (doc.kind === "Job") return doc.spec.template.spec;
  if (doc.kind === "DaemonSet" || doc.kind === "StatefulSet") return doc.spec.template.spec;
  return null;
}

function checkPolicy(overlay, doc, where, all) {
  const spec = podSpec(doc);
  if (!spec) return;
  // Host PID only where docs/agent.md's table says it is needed: the agent opening workloads'
  // legacy CUDA IPC handles. Host IPC nowhere.
  if (spec.hostIPC) bad(where, "host IPC: no pod here needs it");
  const agent = doc.kind === "DaemonSet" && doc.metadata.name === "gdragent";
  if (spec.hostPID && !agent) bad(where, "host PID: only gdragent needs it");
  if (agent && spec.hostPID !== true) {
    bad(where, "gdragent without host PID cannot open workloads' CUDA IPC handles");
  }
  for (const c of [...(spec.initContainers || []), ...spec.containers]) {
    const sc = c.securityContext || {};
    if (sc.allowPrivilegeEscalation !== false) bad(where, `${c.name}: privilege escalation not off`);
    if (!(sc.capabilities && (sc.capabilities.drop || []).includes("ALL"))) {
      bad(where, `${c.name}: capabilities not dropped`);
    }
    // The agent's socket-dir step chowns the node's /run/gdragent (node_prerequisites.js).
    const allowed = agent && c.name === "socket-dir" ? ["CHOWN"] : ["IPC_LOCK"];
    for (const cap of (sc.capabilities && sc.capabilities.add) || []) {
      if (!allowed.includes(cap)) bad(where, `${c.name}: capability ${cap} beyond ${allowed}`);
    }
    if (sc.privileged) bad(where, `${c.name}: privileged`);
  }
  const name = doc.metadata.name;
  if (doc.kind === "DaemonSet") {
    const init = spec.initContainers || [];
    const needs = overlay === "tcp" ? "tcp" : "rdma";
    const cmd = init.length ? argvOf(init[0], all) : [];  // $(GDRSTORE_NEEDS) resolved
    if (!(cmd.includes("doctor") && cmd[cmd.indexOf("--needs") + 1] === needs)) {
      bad(where, `readiness check is not 'gdrctl doctor --needs ${needs}': ${JSON.stringify(cmd)}`);
    }
    if (init.length && init[0].terminationMessagePolicy !== "FallbackToLogsOnError") {
      bad(where, "the readiness check's report does not reach the pod status");
    }
    const main = spec.containers[0];
    // The overlay's transport reaches the agent's argv (ConfigMap gdrstore-transport).
    const argv = argvOf(main, all);
    if (name === "gdragent" && !argv.includes(`--transport=${overlay}`)) {
      bad(where, `agent not started with --transport=${overlay}: ${JSON.stringify(argv)}`);
    }
    if (!main.lifecycle || !main.lifecycle.preStop) bad(where, "no preStop");
    const limits = (main.resources && main.resources.limits) || {};
    const annotations = doc.spec.template.metadata.annotations || {};
    if (overlay === "tcp") {
      if (Object.keys(limits).some((k) => k.startsWith("rdma/"))) bad(where, "tcp asks for RDMA");
      if (!spec.hostNetwork) bad(where, "tcp overlay not on the host network");
    } else {
      if (limits["rdma/rdma_shared_device_a"] !== "1") bad(where, "no RDMA shared device");
      if (annotations["k8s.v1.cni.cncf.io/networks"] !== "gdrstore-rdma") {
        bad(where, "no Multus network");
      }
    }
    if (name === "gdrstored") {
      for (const p of ["readinessProbe", "livenessProbe", "startupProbe"]) {
        if (!(main[p] && main[p].grpc && main[p].grpc.port === 50051)) {
          bad(where, `${p} is not gRPC health on 50051`);
        }
      }
      const grace = spec.terminationGracePeriodSeconds;
      if (!(grace >= 5 + 10 + 5)) bad(where, `grace ${grace} s leaves no room for preStop + drain`);
    }
  }
  if (doc.kind === "Job") {
    const c = spec.containers[0];
    const limits = (c.resources && c.resources.limits) || {};
    if (Object.keys(limits).some((k) => k.startsWith("rdma/"))) bad(where, "workload asks for RDMA");
    if ((c.securityContext.capabilities.add || []).length) bad(where, "workload adds capabilities");
    // The agent's socket comes by a claim (Pod Security restricted: node_prerequisites.js).
    const host = (spec.volumes || []).filter((v) => v.hostPath).map((v) => v.hostPath.path);
    if (host.length) bad(where, `workload mounts host paths ${JSON.stringify(host)}`);
  }
}

async function main() {
  const [overlay, ...files] = process.argv.slice(2);
  const all = [];  // every object of every file: ConfigMaps that the pods' env refers to
  const parsed = [];
  for (const file of files) {
    for (const d of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
      if (d.errors.length) {
        bad(file, `YAML: ${d.errors[0].message}`);
        continue;
      }
      const doc = d.toJSON();
      if (!doc) continue;
      all.push(doc);
      parsed.push({ file, doc });
    }
  }
  let objects = 0;
  for (const { file, doc } of parsed) {
    const where = `${file}: ${doc.kind}/${doc.metadata && doc.metadata.name}`;
    const Model = modelOf(doc);
    if (!Model) {
      bad(where, `no Kubernetes API schema for ${doc.apiVersion} ${doc.kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      bad(where, `schema: ${e.message}`);
    }
    for (const p of await unknownFields(doc)) bad(where, `schema: ${p}`);
    checkPolicy(overlay, doc, where, all);
    objects++;
    console.log(`checked ${where}`);
  }
  for (const p of problems) console.log(`PROBLEM ${p}`);
  console.log(`${overlay}: ${objects} objects, ${problems.length} problems`);
  process.exit(problems.length || objects === 0 ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
