// Regenerates the CRD JSON schemas of this folder from the TypeScript declarations of the @kubernetes-models
// packages (package.json), which are generated from the operators' own CRDs / API types:
//   cd deploy/k8s/schemas && npm ci && node generate.mjs
// Each output is a JSON Schema (draft-07) that rejects unknown fields ("strict"), except where the CRD keeps
// unknown fields (x-kubernetes-preserve-unknown-fields, declared `{}` in TypeScript): those stay open objects.
// Descriptions are dropped to keep the files small. Only the kinds uep's manifests use are generated.
import { writeFileSync, mkdirSync, readFileSync } from "node:fs";
import { createGenerator } from "ts-json-schema-generator";

const KINDS = [
  ["strimzi-kafka-operator", "kafka.strimzi.io", "v1", ["Kafka", "KafkaNodePool", "KafkaTopic", "KafkaUser"]],
  ["keda", "keda.sh", "v1alpha1", ["ScaledObject", "TriggerAuthentication"]],
  ["prometheus-operator", "monitoring.coreos.com", "v1", ["ServiceMonitor", "PodMonitor", "PrometheusRule"]],
];

function clean(node) {
  if (Array.isArray(node)) return node.map(clean);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "description" && typeof value === "string") continue;
    out[key] = clean(value);
  }
  // TypeScript `{}` (a CRD field with x-kubernetes-preserve-unknown-fields): any object.
  if (out.type === "object" && out.additionalProperties === false && !out.properties && !out.patternProperties) {
    delete out.additionalProperties;
  }
  return out;
}

const sources = {};
for (const [pkg, group, version, kinds] of KINDS) {
  const meta = JSON.parse(readFileSync(`node_modules/@kubernetes-models/${pkg}/package.json`, "utf8"));
  sources[group] = { package: `@kubernetes-models/${pkg}@${meta.version}`, license: meta.license, generatedFrom: meta["crd-generate"]?.input ?? meta["go-generate"]?.input };
  mkdirSync(group, { recursive: true });
  for (const kind of kinds) {
    const generator = createGenerator({
      path: `node_modules/@kubernetes-models/${pkg}/${group}/${version}/${kind}.d.ts`,
      type: `I${kind}`,
      tsconfig: "tsconfig.json",
      skipTypeCheck: true,
      additionalProperties: false,
    });
    const schema = clean(generator.createSchema(`I${kind}`));
    writeFileSync(`${group}/${kind.toLowerCase()}_${version}.json`, JSON.stringify(schema, null, 1) + "\n");
    console.log(`${group}/${kind.toLowerCase()}_${version}.json`);
  }
}
writeFileSync("SOURCES.json", JSON.stringify(sources, null, 2) + "\n");
