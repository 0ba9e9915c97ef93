// Prints one ConfigMap entry of a rendered manifest: node config_of.js FILE CONFIGMAP KEY.
"use strict";
const fs = require("fs");
const YAML = require("yaml");
const [file, name, key] = process.argv.slice(2);
for (const d of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
  const o = d.toJSON();
  if (o && o.kind === "ConfigMap" && o.metadata.name === name && o.data && key in o.data) {
    process.stdout.write(o.data[key]);
    process.exit(0);
  }
}
console.error(`no ConfigMap ${name} with ${key} in ${file}`);
process.exit(1);
