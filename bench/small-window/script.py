"""The mock's script for the small-window run: STEPS steps that each print part.txt, a final
answer, and summaries served only to checkpoint summary requests: about 2,000 tokens in a
32k window, in proportion in others (a summary must fit the budget its window gives it)."""
import json
import sys

SUMMARY_REQUEST = "You write checkpoint summaries"
SECTIONS = ["Goal", "Constraints & Preferences", "Completed Work", "Current State", "Blockers",
            "Key Decisions", "Pending User Asks", "Critical Context & Relevant Files"]
steps = int(sys.argv[1])
window = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
lines = max(1, min(40, 12 * window // 32768))
body = "The user said: never edit files under vendor/ and keep the flag ZETA-42.\n" + "".join(
    f"- step {i} read part.txt and printed its lines; nothing failed.\n" for i in range(lines))
summary = "\n".join(f"## {s}\n{body}\n" for s in SECTIONS)
responses = [{"text": f"Step {i}: reading the next part.", "shell": f"cat part.txt; echo step {i}",
              "unless": SUMMARY_REQUEST} for i in range(steps)]
responses.append({"text": "All steps are done.", "unless": SUMMARY_REQUEST})
responses += [{"text": summary, "when": SUMMARY_REQUEST} for _ in range(steps)]
json.dump(responses, sys.stdout)
