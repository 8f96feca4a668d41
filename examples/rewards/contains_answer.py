# A reward for `data.verifier: command` (docs/rewards.md): one JSON line in, one out.
import json
import sys

for line in sys.stdin:
    row = json.loads(line)  # {"prompt", "response", "answer", "metadata": {"id"}, "request_id"}
    hit = str(row["answer"]).strip() in row["response"]
    # Echoing request_id lets Aspen check that this reply answers this request.
    print(json.dumps({"score": 1.0 if hit else 0.0, "request_id": row["request_id"],
                      "extra": {"id": row["metadata"]["id"]}}),
          flush=True)
