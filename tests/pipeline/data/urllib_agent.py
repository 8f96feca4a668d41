"""A bring-your-own-agent program with no client library (urllib only: it starts in tens
of milliseconds, where `import openai` costs ~0.8 s), for the fault tests of
tests/pipeline/agent_loop_faults_test.cpp, where the openai client is not the point.

argv: OUT_DIR [MODE]. stdin: the data row (one JSON line); its "mode" field, or else
argv's MODE, says what to do:
  one_call       one call with its session, then {"reward": 0.5}
  hang           one call with its session, then sleeps (rollout.agent.timeout_s kills it)
  wrong_session  one call with a made-up session id, then {"reward": 0.5}
  late           one call with its session, {"reward": 0.5} (flushed), then a second call
  once_silent    the first episode of OUT_DIR (it creates OUT_DIR/silenced) prints
                 {"reward": 0.5} without calling; the others are one_call
  seeded         two calls, each with a seed and stop strings of its own (sampling a
                 tensor-parallel instance's followers get only from the leader's plan),
                 the reply carried back; reward: the two replies' length over 12, at most 1
Each call's HTTP status and answer (or error body) go to OUT_DIR/<ASPEN_SESSION>.calls,
one JSON line per call, for the test to check what the program was told.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(session, messages, **sampling):
    body = json.dumps({"model": "policy", "messages": messages, "user": session,
                       "max_tokens": 6, **sampling}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            answer = {"status": reply.status, "body": json.loads(reply.read())}
    except urllib.error.HTTPError as error:
        answer = {"status": error.code, "body": error.read().decode(errors="replace")}
    with open(os.path.join(sys.argv[1], os.environ["ASPEN_SESSION"] + ".calls"), "a") as out:
        out.write(json.dumps(answer) + "\n")
    return answer


def main():
    row = json.loads(sys.stdin.readline())
    mode = row.get("mode", sys.argv[2] if len(sys.argv) > 2 else "one_call")
    if mode == "once_silent":
        try:
            os.close(os.open(os.path.join(sys.argv[1], "silenced"), os.O_CREAT | os.O_EXCL))
            print(json.dumps({"reward": 0.5}))
            return
        except FileExistsError:
            mode = "one_call"
    session = os.environ["ASPEN_SESSION"]
    messages = [{"role": "user", "content": row["prompt"]}]
    if mode == "seeded":
        length = 0
        for turn in range(2):
            # Seeded by the session (random per episode): the samples of a group differ.
            seed = int(session[:8], 16) + 1000 * turn
            answer = call(session, messages, seed=seed, stop=["1", "3", "5", "7", "9"])
            reply = answer["body"]["choices"][0]["message"]["content"]
            length += len(reply)
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": "Again?"}]
        print(json.dumps({"reward": min(1.0, length / 12)}))
        return
    call("f" * 32 if mode == "wrong_session" else session, messages)
    if mode == "hang":
        time.sleep(3600)
    print(json.dumps({"reward": 0.5}), flush=True)
    if mode == "late":
        # Aspen closes the session when it reads the reward line; give it that moment,
        # so that this call is late, not one the reward races.
        time.sleep(0.5)
        call(session, messages + [{"role": "user", "content": "And once more?"}])


if __name__ == "__main__":
    main()
