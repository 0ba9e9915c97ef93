// Prints a DaemonSet's first init container command from a rendered manifest, one argument a
// line, as kubelet runs it (pod_env.js: $(GDRSTORE_NEEDS) from the ConfigMap gdrstore-transport):
// node init_command.js FILE DAEMONSET
"use strict";
const fs = require("fs");
const YAML = require("yaml");
const { argvOf } = require("./pod_env");
const [file, name] = process.argv.slice(2);
const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJSON());
for (const o of docs) {
  if (o && o.kind === "DaemonSet" && o.metadata.name === name) {
    process.stdout.write(argvOf(o.spec.template.spec.initContainers[0], docs).join("\n") + "\n");
    process.exit(0);
  }
}
process.exit(1);
