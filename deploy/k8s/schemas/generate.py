#!/usr/bin/env python3
"""Regenerates the JSON schemas kubeconform checks deploy/k8s against.

kubeconform downloads schemas from GitHub by default; CI has no such access,
so the schemas of the kinds we use are vendored here, generated from the
Kubernetes OpenAPI spec and KEDA's CRD, both fetched through the Go module
proxy:

    go mod download k8s.io/kubernetes@v1.31.4 github.com/kedacore/keda/v2@v2.15.1
    python3 deploy/k8s/schemas/generate.py

Each schema is standalone (every $ref inlined) and strict (an unknown field
is an error, as `kubectl apply --validate=strict` has it). int-or-string and
quantities accept both forms, as the API server does.
"""
import json
import os
import subprocess
import sys

import yaml

K8S_VERSION = "v1.31.4"
KEDA_VERSION = "v2.15.1"
# The kinds deploy/k8s uses; add one here when a manifest needs it.
KINDS = [
    ("io.k8s.api.apps.v1.Deployment", "deployment-apps-v1"),
    ("io.k8s.api.batch.v1.Job", "job-batch-v1"),
    ("io.k8s.api.core.v1.Service", "service-v1"),
    ("io.k8s.api.core.v1.ServiceAccount", "serviceaccount-v1"),
    ("io.k8s.api.core.v1.ConfigMap", "configmap-v1"),
    ("io.k8s.api.policy.v1.PodDisruptionBudget", "poddisruptionbudget-policy-v1"),
    ("io.k8s.api.networking.v1.NetworkPolicy", "networkpolicy-networking-v1"),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler", "horizontalpodautoscaler-autoscaling-v2"),
]

HERE = os.path.dirname(os.path.abspath(__file__))


def moddir(mod):
    out = subprocess.check_output(["go", "mod", "download", "-json", mod], cwd="/tmp")
    return json.loads(out)["Dir"]


def strict(node):
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for v in node.values():
            strict(v)
    elif isinstance(node, list):
        for v in node:
            strict(v)
    return node


def inline(node, defs, stack):
    if isinstance(node, list):
        return [inline(v, defs, stack) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        if name in stack:  # recursive types (none in our kinds): accept anything
            return {}
        return inline(defs[name], defs, stack | {name})
    if node.get("format") == "int-or-string":
        return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    out = {k: inline(v, defs, stack) for k, v in node.items() if k != "description"}
    return out


def main():
    spec = json.load(open(os.path.join(moddir("k8s.io/kubernetes@" + K8S_VERSION), "api/openapi-spec/swagger.json")))
    defs = spec["definitions"]
    # Quantities are strings or numbers ("500m", 1).
    defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    for name, fname in KINDS:
        schema = strict(inline(defs[name], defs, {name}))
        schema["$schema"] = "http://json-schema.org/schema#"
        with open(os.path.join(HERE, fname + ".json"), "w") as f:
            json.dump(schema, f, sort_keys=True, separators=(",", ":"))
    crd = yaml.safe_load(open(os.path.join(moddir("github.com/kedacore/keda/v2@" + KEDA_VERSION),
                                           "config/crd/bases/keda.sh_scaledobjects.yaml")))
    for v in crd["spec"]["versions"]:
        schema = strict(v["schema"]["openAPIV3Schema"])
        with open(os.path.join(HERE, "scaledobject-keda-%s.json" % v["name"]), "w") as f:
            json.dump(schema, f, sort_keys=True, separators=(",", ":"))


if __name__ == "__main__":
    sys.exit(main())
