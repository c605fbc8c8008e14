#!/usr/bin/env python3
"""Turns gitleaks' rule set (config/gitleaks.toml, MIT) into the JSON keel's redaction
carries (crates/keel-tools/data/gitleaks-rules.json).

usage: scripts/gitleaks-rules.py GITLEAKS_TOML COMMIT > crates/keel-tools/data/gitleaks-rules.json

Rules that need a file path (keel redacts text, not files) or have no pattern are left out;
everything else is kept as gitleaks wrote it: pattern, secret group, entropy, keywords and
allowlists, and the global allowlist.
"""
import json
import sys
import tomllib


def allowlist(entry):
    return {
        "condition": entry.get("condition", "OR").upper(),
        "target": entry.get("regexTarget", "secret"),
        "regexes": entry.get("regexes", []),
        "stopwords": entry.get("stopwords", []),
    }


config = tomllib.load(open(sys.argv[1], "rb"))
rules = []
for rule in config["rules"]:
    if "regex" not in rule or "path" in rule:
        continue
    rules.append({
        "id": rule["id"],
        "regex": rule["regex"],
        "secret_group": rule.get("secretGroup", 0),
        "entropy": rule.get("entropy", 0.0),
        "keywords": [k.lower() for k in rule.get("keywords", [])],
        "allowlists": [allowlist(a) for a in rule.get("allowlists", [])],
    })
global_allow = config.get("allowlist", {})
json.dump({
    "source": f"gitleaks config/gitleaks.toml at {sys.argv[2]} (MIT License, Copyright (c) 2019 Zachary Rice)",
    "allowlist": {
        "regexes": global_allow.get("regexes", []),
        "stopwords": global_allow.get("stopwords", []),
    },
    "rules": rules,
}, sys.stdout, indent=1)
sys.stdout.write("\n")
