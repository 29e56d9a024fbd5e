#!/usr/bin/env python3
"""tests/integration/schema_check.py SCHEMA JSON: check JSON against the subset of JSON
Schema that docs/*.schema.json use (type, required, properties, additionalProperties
false, items, enum, pattern, minimum, $ref to a JSON pointer within the schema), so the tests need no extra package. Prints each
violation with its path; exits 1 when there is one."""
import json
import re
import sys

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
         "integer": int, "number": (int, float)}


ROOT = {}


def resolve(schema):
    """A {"$ref": "#/a/b"} schema: the part of the root schema it points to."""
    while "$ref" in schema:
        node = ROOT
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def check(schema, value, path, out):
    schema = resolve(schema)
    t = schema.get("type")
    if t:
        ok = isinstance(value, TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
        if not ok:
            out.append("%s: expected %s, got %r" % (path, t, value))
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append("%s: %r not in %r" % (path, value, schema["enum"]))
    if "pattern" in schema and not re.search(schema["pattern"], value):
        out.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if "minimum" in schema and value < schema["minimum"]:
        out.append("%s: %r below %r" % (path, value, schema["minimum"]))
    if t == "object":
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                out.append("%s: missing %s" % (path, k))
        for k, v in value.items():
            if k in props:
                check(props[k], v, path + "." + k, out)
            elif schema.get("additionalProperties") is False:
                out.append("%s: undocumented field %s" % (path, k))
    if t == "array" and "items" in schema:
        for i, v in enumerate(value):
            check(schema["items"], v, "%s[%d]" % (path, i), out)


def main():
    schema = json.load(open(sys.argv[1]))
    ROOT.update(schema)
    value = json.load(open(sys.argv[2]))
    out = []
    check(schema, value, "$", out)
    for line in out:
        print(line)
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
