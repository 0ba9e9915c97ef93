// Prints a DaemonSet's first init container command from a rendered manifest, one argument a
// line: node init_command.js FILE DAEMONSET
"use strict";
const fs = require("fs");
const YAML = require("yaml");
const [file, name] = process.argv.slice(2);
for (const d of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
  const o = d.toJSON();
  if (o && o.kind === "DaemonSet" && o.metadata.name === name) {
    process.stdout.write(o.spec.template.spec.initContainers[0].command.join("\n") + "\n");
    process.exit(0);
  }
}
process.exit(1);
