// Prints the exec command of one probe of a DaemonSet's main container in a rendered manifest,
// one arg a line: node probe_of.js FILE DAEMONSET readinessProbe|livenessProbe|startupProbe.
"use strict";
const fs = require("fs");
const YAML = require("yaml");
const [file, name, probe] = process.argv.slice(2);
for (const d of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
  const o = d.toJSON();
  if (!o || o.kind !== "DaemonSet" || o.metadata.name !== name) continue;
  const p = o.spec.template.spec.containers[0][probe];
  if (!p || !p.exec) break;
  process.stdout.write(p.exec.command.join("\n") + "\n");
  process.exit(0);
}
console.error(`no DaemonSet ${name} with an exec ${probe} in ${file}`);
process.exit(1);
