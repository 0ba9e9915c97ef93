// What a cluster needs of deploy/kubernetes before it admits and runs the pods
// (docs/kubernetes.md, "Admission and scheduling"): Pod Security levels, the agent's socket
// directory, priorities and tolerations, service accounts, node selection with and without the
// GPU Operator, readiness checks equipped as the containers they guard, metrics on the pod's
// address, the agent's update strategy and Secret, the ServiceMonitor.
// usage: node node_prerequisites.js check OVERLAY RENDERED.yaml SERVICEMONITOR.yaml
//        node node_prerequisites.js examples FILE...
//        node node_prerequisites.js self-test RENDERED.yaml EXAMPLES_DIR
//        node node_prerequisites.js command RENDERED.yaml DAEMONSET POD_IP
// check/examples print each problem and exit 1 on any; self-test breaks a copy of the objects
// once per rule and exits 1 when a breakage is not refused with its message.
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const load = (files) => files.flatMap((f) =>
  YAML.parseAllDocuments(fs.readFileSync(f, "utf8")).map((d) => d.toJSON()).filter((o) => o));
const MONITOR = "deploy/kubernetes/base/servicemonitor.yaml";
const find = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const podSpec = (o) => (["DaemonSet", "Job", "Deployment", "StatefulSet"].includes(o.kind)
  ? o.spec.template.spec : null);
const containersOf = (spec) => [...(spec.initContainers || []), ...spec.containers,
                                ...(spec.ephemeralContainers || [])];

// Pod Security Standards (latest): the problems that keep `pod` out of `level`.
const BASELINE_CAPS = new Set(["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
  "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]);
const RESTRICTED_VOLUMES = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
  "persistentVolumeClaim", "projected", "secret"];
const SAFE_SYSCTLS = new Set(["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"]);
function podSecurity(spec, level) {
  const out = [];
  if (level === "privileged") return out;
  const psc = spec.securityContext || {};
  for (const h of ["hostNetwork", "hostPID", "hostIPC"]) if (spec[h]) out.push(`${h}`);
  for (const v of spec.volumes || []) if (v.hostPath) out.push(`hostPath volume ${v.name}`);
  for (const s of psc.sysctls || []) if (!SAFE_SYSCTLS.has(s.name)) out.push(`sysctl ${s.name}`);
  if ((psc.seccompProfile || {}).type === "Unconfined") out.push("seccomp Unconfined");
  for (const c of containersOf(spec)) {
    const sc = c.securityContext || {};
    const caps = sc.capabilities || {};
    if (sc.privileged) out.push(`${c.name}: privileged`);
    for (const cap of caps.add || []) {
      if (!BASELINE_CAPS.has(cap)) out.push(`${c.name}: capability ${cap}`);
    }
    for (const p of c.ports || []) if (p.hostPort) out.push(`${c.name}: hostPort ${p.hostPort}`);
    if (sc.procMount && sc.procMount !== "Default") out.push(`${c.name}: procMount`);
    if (sc.seccompProfile && sc.seccompProfile.type === "Unconfined") {
      out.push(`${c.name}: seccomp Unconfined`);
    }
  }
  if (level === "baseline") return out;
  for (const v of spec.volumes || []) {
    if (!RESTRICTED_VOLUMES.some((k) => k in v) && !v.hostPath) {
      out.push(`volume ${v.name} of a type restricted refuses`);
    }
  }
  if (psc.runAsUser === 0) out.push("runAsUser 0");
  const seccompOk = (p) => p && ["RuntimeDefault", "Localhost"].includes(p.type);
  for (const c of containersOf(spec)) {
    const sc = c.securityContext || {};
    const caps = sc.capabilities || {};
    if (sc.allowPrivilegeEscalation !== false) out.push(`${c.name}: allowPrivilegeEscalation`);
    if (!(caps.drop || []).includes("ALL")) out.push(`${c.name}: capabilities not dropped`);
    for (const cap of caps.add || []) {
      if (cap !== "NET_BIND_SERVICE") out.push(`${c.name}: adds ${cap}`);
    }
    if (sc.runAsNonRoot === false || (sc.runAsNonRoot !== true && psc.runAsNonRoot !== true)) {
      out.push(`${c.name}: runAsNonRoot not set`);
    }
    if (sc.runAsUser === 0) out.push(`${c.name}: runAsUser 0`);
    if (!seccompOk(sc.seccompProfile) && !seccompOk(psc.seccompProfile)) {
      out.push(`${c.name}: no RuntimeDefault seccomp profile`);
    }
  }
  return out;
}
const LEVELS = ["privileged", "baseline", "restricted"];

// The agent's node terms: the GPU Operator's label or gdrstore.io/agent, ORed.
function selectsWithAndWithoutOperator(spec) {
  const terms = (((spec.affinity || {}).nodeAffinity || {})
    .requiredDuringSchedulingIgnoredDuringExecution || {}).nodeSelectorTerms || [];
  const one = (key) => terms.some((t) => (t.matchExpressions || []).length === 1 &&
    t.matchExpressions[0].key === key && t.matchExpressions[0].operator === "In" &&
    JSON.stringify(t.matchExpressions[0].values) === '["true"]');
  const selector = spec.nodeSelector || {};
  return one("nvidia.com/gpu.present") && one("gdrstore.io/agent") &&
         !("nvidia.com/gpu.present" in selector) && !("gdrstore.io/agent" in selector);
}
const toleratesGpuTaint = (spec) => (spec.tolerations || []).some((t) =>
  (t.key === "nvidia.com/gpu" && t.operator === "Exists") || (!t.key && t.operator === "Exists"));

function checkServiceAccount(objs, o, spec, bad) {
  const sa = find(objs, "ServiceAccount", spec.serviceAccountName || "");
  if (!spec.serviceAccountName || spec.serviceAccountName === "default") {
    bad("no service account of its own");
  } else if (!sa) {
    bad(`service account ${spec.serviceAccountName} not defined`);
  } else if (sa.automountServiceAccountToken !== false ||
             spec.automountServiceAccountToken !== false) {
    bad("an API token is mounted, and nothing in it calls the Kubernetes API");
  }
}

// The node components of one rendered overlay.
function checkOverlay(overlay, objs, monitor) {
  const problems = [];
  const ns = find(objs, "Namespace", "gdrstore");
  const labels = (ns && ns.metadata.labels) || {};
  if (labels["pod-security.kubernetes.io/enforce"] !== "privileged") {
    problems.push("Namespace/gdrstore: not labelled pod-security.kubernetes.io/enforce=privileged");
  }
  for (const o of objs) {
    const spec = podSpec(o);
    if (!spec) continue;
    const bad = (what) => problems.push(`${o.kind}/${o.metadata.name}: ${what}`);
    const level = labels["pod-security.kubernetes.io/enforce"] || "privileged";
    for (const p of podSecurity(spec, level)) bad(`Pod Security ${level} refuses: ${p}`);
    if (o.metadata.namespace !== "gdrstore") bad("not in the namespace gdrstore");
    if (spec.priorityClassName !== "system-node-critical") {
      bad("priorityClassName is not system-node-critical");
    }
    if (!toleratesGpuTaint(spec)) bad("no toleration of the nvidia.com/gpu taint");
    checkServiceAccount(objs, o, spec, bad);
    // The readiness check is given what its container has, or its checks judge a bare pod.
    const init = (spec.initContainers || [])[0];
    const main = spec.containers[0];
    if (init) {
      const caps = (c) => JSON.stringify(((c.securityContext || {}).capabilities || {}).add || []);
      const devices = (c) => JSON.stringify(Object.entries((c.resources || {}).limits || {})
        .filter(([k]) => k.includes("/")).sort());
      const gpus = (c) => JSON.stringify((c.env || []).filter((e) => e.name ===
        "NVIDIA_VISIBLE_DEVICES"));
      for (const [what, of] of [["capabilities", caps], ["device resources", devices],
                                ["GPUs (NVIDIA_VISIBLE_DEVICES)", gpus]]) {
        if (of(init) !== of(main)) {
          bad(`readiness check ${init.name} has ${what} ${of(init)}, its container ${of(main)}`);
        }
      }
    }
    if (o.metadata.name === "gdragent") {
      if (o.spec.updateStrategy.type !== "OnDelete") {
        bad("updateStrategy is not OnDelete: an update would stop agents under running jobs");
      }
      if (!selectsWithAndWithoutOperator(spec)) {
        bad("node terms do not select both nvidia.com/gpu.present=true and gdrstore.io/agent=true");
      }
      for (const v of spec.volumes) {
        if (v.secret && v.secret.secretName === "gdrstore-tokens") {
          bad("mounts gdrstore-tokens, the Secret with the admin token");
        }
      }
      const dir = spec.volumes.find((v) => v.hostPath && v.hostPath.path === "/run/gdragent");
      const uid = `${spec.securityContext.runAsUser}:${spec.securityContext.runAsGroup}`;
      const step = (spec.initContainers || []).find((c) => dir &&
        (c.volumeMounts || []).some((m) => m.name === dir.name) &&
        JSON.stringify(c.command) === JSON.stringify(["/usr/bin/chown", uid, "/run/gdragent"]));
      if (!step) {
        bad(`no init step making /run/gdragent the agent's (chown ${uid}) before it starts`);
      } else if (JSON.stringify(step.securityContext.capabilities.add) !== '["CHOWN"]') {
        bad(`${step.name} takes capabilities beyond CHOWN`);
      }
    }
    if (o.metadata.name === "gdrstored") {
      const conf = find(objs, "ConfigMap", "gdrstored-config").data["gdrstored.conf"];
      if (/^\s*metrics-listen\s*=\s*"?0\.0\.0\.0/m.test(conf)) {
        bad("gdrstored.conf serves metrics on every address of the node");
      }
      const flag = main.command.find((a) => a.startsWith("--metrics-listen="));
      const podIp = (main.env || []).find((e) => e.name === "POD_IP");
      const port = (main.ports || []).find((p) => p.name === "metrics");
      if (!flag || !port || flag !== `--metrics-listen=$(POD_IP):${port.containerPort}` ||
          !podIp || !podIp.valueFrom || podIp.valueFrom.fieldRef.fieldPath !== "status.podIP") {
        bad("metrics not on the pod's address (--metrics-listen=$(POD_IP):PORT, POD_IP from " +
            "status.podIP, PORT the metrics port)");
      }
    }
  }
  if (overlay !== "tcp") {
    const conf = find(objs, "ConfigMap", "gdrstored-config").data["gdrstored.conf"];
    if (/^\s*rdma-device\s*=/m.test(conf)) {
      problems.push("ConfigMap/gdrstored-config: rdma-device names one device for every node " +
                    "(leave it out: each node's pod takes the device its plugin hands it)");
    }
  }
  // The ServiceMonitor finds the endpoints the scrape config finds.
  const svc = find(objs, "Service", "gdrstored");
  const sm = monitor.find((o) => o.kind === "ServiceMonitor");
  const where = "ServiceMonitor/gdrstored";
  if (!sm) {
    problems.push(`${where}: missing`);
  } else {
    const sel = sm.spec.selector.matchLabels || {};
    if (!Object.keys(sel).length ||
        !Object.entries(sel).every(([k, v]) => (svc.metadata.labels || {})[k] === v)) {
      problems.push(`${where}: selector ${JSON.stringify(sel)} does not match Service/gdrstored`);
    }
    if (JSON.stringify(sm.spec.namespaceSelector) !== '{"matchNames":["gdrstore"]}') {
      problems.push(`${where}: does not look in the namespace gdrstore`);
    }
    const ports = svc.spec.ports.map((p) => p.name);
    for (const e of sm.spec.endpoints) {
      if (!ports.includes(e.port)) problems.push(`${where}: port ${e.port} not on the Service`);
    }
  }
  return problems;
}

// The example workloads: each pod admitted by its namespace's Pod Security level, which must be
// restricted, and placed where an agent runs.
function checkExamples(objs) {
  const problems = [];
  for (const o of objs) {
    const spec = podSpec(o);
    if (!spec || o.kind !== "Job") continue;
    const bad = (what) => problems.push(`${o.kind}/${o.metadata.name}: ${what}`);
    const ns = find(objs, "Namespace", o.metadata.namespace);
    const level = ns && (ns.metadata.labels || {})["pod-security.kubernetes.io/enforce"];
    if (level !== "restricted") {
      bad(`namespace ${o.metadata.namespace} does not enforce Pod Security restricted`);
    }
    for (const p of podSecurity(spec, "restricted")) bad(`Pod Security restricted refuses: ${p}`);
    checkServiceAccount(objs, o, spec, bad);
    if (!selectsWithAndWithoutOperator(spec)) {
      bad("node terms do not select both nvidia.com/gpu.present=true and gdrstore.io/agent=true");
    }
    if (!toleratesGpuTaint(spec)) bad("no toleration of the nvidia.com/gpu taint");
    // The agent's socket by a claim bound to the node's /run/gdragent.
    const claims = spec.volumes.filter((v) => v.persistentVolumeClaim);
    const mounted = claims.some((v) => {
      const pvc = objs.find((x) => x.kind === "PersistentVolumeClaim" &&
        x.metadata.name === v.persistentVolumeClaim.claimName &&
        x.metadata.namespace === o.metadata.namespace);
      const pv = pvc && find(objs, "PersistentVolume", pvc.spec.volumeName);
      return pv && pv.spec.hostPath && pv.spec.hostPath.path === "/run/gdragent" &&
        pv.spec.claimRef.name === pvc.metadata.name &&
        pv.spec.claimRef.namespace === pvc.metadata.namespace &&
        spec.containers[0].volumeMounts.some((m) => m.name === v.name &&
                                                   m.mountPath === "/run/gdragent");
    });
    if (!mounted) bad("no claim of the node's /run/gdragent mounted at /run/gdragent");
  }
  return problems;
}

// Each rule broken once on a copy: the checks must name it.
function selfTest(rendered, examplesDir) {
  const exampleFiles = fs.readdirSync(examplesDir).filter((f) => f.endsWith(".yaml"))
    .map((f) => path.join(examplesDir, f));
  const overlayCases = [
    ["Namespace/gdrstore: not labelled", (objs) => {
      delete find(objs, "Namespace", "gdrstore").metadata.labels; }],
    ["priorityClassName is not system-node-critical", (objs) => {
      delete podSpec(find(objs, "DaemonSet", "gdragent")).priorityClassName; }],
    ["no toleration of the nvidia.com/gpu taint", (objs) => {
      delete podSpec(find(objs, "DaemonSet", "gdrstored")).tolerations; }],
    ["an API token is mounted", (objs) => {
      find(objs, "ServiceAccount", "gdragent").automountServiceAccountToken = true; }],
    ["readiness check readiness-check has capabilities", (objs) => {
      podSpec(find(objs, "DaemonSet", "gdragent")).initContainers[0]
        .securityContext.capabilities.add = []; }],
    ["readiness check readiness-check has GPUs", (objs) => {
      delete podSpec(find(objs, "DaemonSet", "gdragent")).initContainers[0].env; }],
    ["updateStrategy is not OnDelete", (objs) => {
      find(objs, "DaemonSet", "gdragent").spec.updateStrategy = { type: "RollingUpdate" }; }],
    ["node terms do not select both", (objs) => {
      const spec = podSpec(find(objs, "DaemonSet", "gdragent"));
      delete spec.affinity;
      spec.nodeSelector = { "nvidia.com/gpu.present": "true" }; }],
    ["mounts gdrstore-tokens", (objs) => {
      podSpec(find(objs, "DaemonSet", "gdragent")).volumes
        .find((v) => v.secret).secret.secretName = "gdrstore-tokens"; }],
    ["no init step making /run/gdragent the agent's", (objs) => {
      const spec = podSpec(find(objs, "DaemonSet", "gdragent"));
      spec.initContainers = spec.initContainers.slice(0, 1); }],
    ["metrics not on the pod's address", (objs) => {
      const main = podSpec(find(objs, "DaemonSet", "gdrstored")).containers[0];
      main.command = main.command.filter((a) => !a.startsWith("--metrics-listen")); }],
    ["serves metrics on every address", (objs) => {
      find(objs, "ConfigMap", "gdrstored-config").data["gdrstored.conf"] +=
        'metrics-listen = "0.0.0.0:9187"\n'; }],
    ["rdma-device names one device for every node", (objs) => {
      find(objs, "ConfigMap", "gdrstored-config").data["gdrstored.conf"] +=
        'rdma-device = ["mlx5_0"]\n'; }, "rc"],
    ["ServiceMonitor/gdrstored: selector", (objs, monitor) => {
      monitor[0].spec.selector.matchLabels = { "app.kubernetes.io/name": "gdragent" }; }],
  ];
  const exampleCases = [
    ["Pod Security restricted refuses: hostPath volume agent", (objs) => {
      const spec = podSpec(objs.find((o) => o.kind === "Job"));
      spec.volumes.find((v) => v.name === "agent").hostPath = { path: "/run/gdragent" }; }],
    ["Pod Security restricted refuses: checkpoint: adds IPC_LOCK", (objs) => {
      podSpec(find(objs, "Job", "checkpoint-llama3-8b")).containers[0]
        .securityContext.capabilities.add = ["IPC_LOCK"]; }],
    ["does not enforce Pod Security restricted", (objs) => {
      find(objs, "Namespace", "gdrstore-workloads").metadata.labels = {}; }],
    ["no claim of the node's /run/gdragent", (objs) => {
      find(objs, "PersistentVolume", "gdragent-socket-gdrstore-workloads")
        .spec.hostPath.path = "/run"; }],
  ];
  let failures = 0;
  const expect = (problems, message, name) => {
    if (!problems.some((p) => p.includes(message))) {
      console.log(`SELF-TEST FAIL: breaking '${name}' not refused: ${JSON.stringify(problems)}`);
      failures++;
    }
  };
  for (const [message, breakIt, overlay] of overlayCases) {
    const objs = load([rendered]);
    const monitor = load([path.join(__dirname, "../../..", MONITOR)]);
    breakIt(objs, monitor);
    expect(checkOverlay(overlay || "tcp", objs, monitor), message, message);
  }
  for (const [message, breakIt] of exampleCases) {
    const objs = load(exampleFiles);
    breakIt(objs);
    expect(checkExamples(objs), message, message);
  }
  console.log(`self-test: ${overlayCases.length + exampleCases.length} breakages, ` +
              `${failures} not refused`);
  return failures;
}

const [mode, ...args] = process.argv.slice(2);
let problems;
if (mode === "check") {
  problems = checkOverlay(args[0], load([args[1]]), load([args[2]]));
} else if (mode === "examples") {
  problems = checkExamples(load(args));
} else if (mode === "command") {
  // The DaemonSet's container command as kubelet expands it, $(POD_IP) given: one arg a line.
  const [file, name, podIp] = args;
  const main = podSpec(find(load([file]), "DaemonSet", name)).containers[0];
  process.stdout.write(main.command.map((a) => a.split("$(POD_IP)").join(podIp)).join("\n") + "\n");
  process.exit(0);
} else if (mode === "self-test") {
  process.exit(selfTest(args[0], args[1]) ? 1 : 0);
} else {
  console.error("usage: node_prerequisites.js check|examples|self-test ...");
  process.exit(2);
}
for (const p of problems) console.log(`PROBLEM ${p}`);
console.log(`${mode} ${args[0]}: ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
