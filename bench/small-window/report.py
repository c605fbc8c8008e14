"""One line of the small-window run: exit code, summaries and their tokens, archives, the
largest request the mock received (its bytes over four, the mock's own usage count) and wall
time."""
import json
import sys

name, code, start, end, events, requests, window = sys.argv[1:8]
summaries = tokens = archives = 0
for line in open(events):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    kind = event.get("kind")
    if kind == "compaction_finished":
        summaries += 1
        tokens += event["details"].get("summary_tokens", 0)
    elif kind == "archived":
        archives += 1
largest = 0
for line in open(requests):
    body = json.loads(line).get("body")
    if body:
        largest = max(largest, len(json.dumps(body)) // 4)
print(f"{name:<10} {code:>5} {summaries:>9} {tokens:>14} {archives:>8} {largest:>8} of {window:<5} "
      f"{float(end) - float(start):>8.1f}")
