"""A bring-your-own-agent program written with the official `openai` client, as the
runs of tests/pipeline/agent_run_test.cpp start it (rollout.agent.command): two calls
per episode through OPENAI_BASE_URL with the session id as `user`, each reply carried
back verbatim and a user message added between them.

argv: MODE OUT_DIR. stdin: the data row (one JSON line). stdout: {"reward": x}, the
length of the last reply's text over 20 (capped at 1): rewards that differ within a group.
It writes what the client saw (each reply's token texts and log-probs) to
OUT_DIR/<session>.json for the test to compare with what Aspen trained.

MODE "two_turns" is that (a row's "mode" field, when present, replaces argv's); the
others misbehave, for the fault tests:
  once_crash  the first episode of OUT_DIR (it creates OUT_DIR/crashed) exits 3 after its
              first call; the others are two_turns
  broken      prints garbage without calling
  silent      prints a reward without calling
  flood_now   prints 10 MB at once, without calling
  crash_now   exits 3 at once
  crash, garbage, flood (10 MB on stdout), late (calls after its reward),
  wrong_session, hang (sleeps after its first call): the same after their first call
"""
import json
import os
import sys
import time


def main():
    mode, out_dir = sys.argv[1], sys.argv[2]
    row = json.loads(sys.stdin.readline())
    mode = row.get("mode", mode)
    session = os.environ["ASPEN_SESSION"]
    if mode == "once_crash":
        try:
            os.close(os.open(os.path.join(out_dir, "crashed"), os.O_CREAT | os.O_EXCL))
            mode = "crash"
        except FileExistsError:
            mode = "two_turns"
    if mode == "broken":
        print("not a reward")
        return
    if mode == "silent":
        print(json.dumps({"reward": 1.0}))
        return
    if mode == "flood_now":
        sys.stdout.write("x" * (10 << 20))
        return
    if mode == "crash_now":
        sys.exit(3)
    import openai  # here: the modes above exit at once, without its import's second

    client = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"],
                           api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    if mode == "wrong_session":
        session = "f" * 32
    messages = [{"role": "user", "content": row["prompt"]}]
    seen = []
    if mode == "late":
        print(json.dumps({"reward": 0.5}), flush=True)
    try:
        for turn in range(2):
            reply = client.chat.completions.create(
                model="policy", messages=messages, user=session, max_tokens=6, logprobs=True)
            choice = reply.choices[0]
            seen.append({"tokens": [t.token for t in choice.logprobs.content],
                         "logprobs": [t.logprob for t in choice.logprobs.content]})
            messages.append({"role": "assistant", "content": choice.message.content or ""})
            if mode == "crash":
                sys.exit(3)
            if mode == "hang":
                time.sleep(3600)
            if turn == 0:
                messages.append({"role": "user", "content": "Once more."})
    except openai.APIStatusError as error:
        seen.append({"error": error.status_code, "message": str(error)})
    with open(os.path.join(out_dir, os.environ["ASPEN_SESSION"] + ".seen"), "w") as out:
        json.dump({"mode": mode, "seen": seen}, out)
    if mode == "garbage":
        print("the answer is 42")
    elif mode == "flood":
        sys.stdout.write("x" * (10 << 20))
    elif mode != "late":
        print(json.dumps({"reward": min(1.0, len(messages[-1]["content"]) / 20)}))


if __name__ == "__main__":
    main()
